//! Checks a bodyless `fn` signature against a [`Spec`] and says which parameter plays which role.
//!
//! Parameters are matched by name, in any order (`a, b, c, batch, m, n, k, alpha, beta, bias` for a matmul; a
//! tensor program's own names, such as `x, y, out, s, n` for an elementwise map), so the generated function
//! keeps the order the user wrote. Types are
//! checked against the dtype and against what the kernel does with each buffer: a buffer the kernel writes must be
//! `&mut`, one it only reads must not be.

use crate::error::Errors;
use crate::model::{DType, Dim, Family, Spec};
use crate::program::{Elem, Program};
use serde::{Deserialize, Serialize};

/// What a parameter is to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Role {
    /// Matmul left operand.
    A,
    /// Matmul right operand.
    B,
    /// Matmul output.
    C,
    /// Matmul bias vector (length `n`).
    Bias,
    /// Number of matrices in a batch.
    Batch,
    /// Rows of `C`.
    M,
    /// Columns of `C`.
    N,
    /// Matmul reduction dimension.
    K,
    /// Matmul product scale.
    Alpha,
    /// Matmul scale of the old `C`.
    Beta,
    /// A tensor program's input: an index into its inputs.
    Input(u16),
    /// A tensor program's output: an index into its statements.
    Output(u16),
    /// A tensor program's dimension: an index into its dimensions.
    Extent(u16),
    /// A tensor program's run-time scalar: an index into its parameters.
    Param(u16),
    /// A matmul batch dimension after the first, when a contraction has several (`c[b, h, i, j] = …` batches
    /// over `b` ([`Role::Batch`]) and `h` (`BatchAxis(1)`)): the batch is their product.
    BatchAxis(u16),
}

/// How the kernel uses a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    /// Only read.
    Read,
    /// Only written.
    Write,
    /// Read, then written.
    ReadWrite,
}

/// The kind of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// A device buffer (`&CudaSlice<T>` / `&mut CudaSlice<T>`).
    Buffer(Access),
    /// A dimension, any primitive integer type.
    Dim,
    /// A scalar of the spec's dtype.
    Scalar,
}

/// One parameter of the user's signature, in the user's order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Param {
    /// The name as written.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Its kind.
    pub kind: Kind,
}

/// The checked signature: one [`Param`] per declared parameter, in declaration order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Binding {
    /// The parameters.
    pub params: Vec<Param>,
}

impl Binding {
    /// The parameter playing `role`, if declared.
    pub fn get(&self, role: Role) -> Option<&Param> {
        self.params.iter().find(|p| p.role == role)
    }

    /// The canonical text of what the kernel is given: roles and kinds sorted by role. Names and order are left
    /// out on purpose: renaming or reordering parameters changes the wrapper, not the kernel, and must not retune.
    pub fn canonical(&self) -> String {
        let mut params: Vec<&Param> = self.params.iter().collect();
        params.sort_by_key(|p| p.role);
        params
            .iter()
            .map(|p| format!("{:?}:{:?}", p.role, p.kind))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The signature a spec asks for, as a user would declare it: `fn k(a: &CudaSlice<f32>, …, k: usize)`, the
/// parameters in the order the documentation lists them (any order binds).
pub fn expected_signature(spec: &Spec) -> String {
    let (params, _) = expected(spec);
    let params: Vec<String> = params
        .iter()
        .map(|p| {
            let ty = match p.kind {
                Kind::Buffer(Access::Read) => format!("&CudaSlice<{}>", p.elem.path),
                Kind::Buffer(_) => format!("&mut CudaSlice<{}>", p.elem.path),
                Kind::Dim => "usize".to_string(),
                Kind::Scalar => p.elem.path.to_string(),
            };
            format!("{}: {ty}", p.name)
        })
        .collect();
    format!("fn k({})", params.join(", "))
}

/// A parameter the spec asks for.
struct Expected {
    name: String,
    role: Role,
    kind: Kind,
    optional: bool,
    /// The element type of a buffer or scalar: the spec's, except a matmul's bias and scales, which are f32
    /// whatever the operands hold, and a tensor program's integer outputs.
    elem: ElemType,
}

/// An element type as a signature spells it.
#[derive(Clone, Copy)]
struct ElemType {
    /// The last path segment (`bf16`).
    name: &'static str,
    /// The path messages show (`half::bf16`).
    path: &'static str,
}

impl From<DType> for ElemType {
    fn from(d: DType) -> Self {
        ElemType {
            name: d.rust_type(),
            path: d.rust_path(),
        }
    }
}

fn expected(spec: &Spec) -> (Vec<Expected>, Vec<(String, u64)>) {
    let buf = |name: &str, role, access| Expected {
        name: name.into(),
        role,
        kind: Kind::Buffer(access),
        optional: false,
        elem: spec.dtype.into(),
    };
    let mut fixed = Vec::new();
    let mut dim = |name: &str, role, d: Dim, out: &mut Vec<Expected>| match d {
        Dim::Runtime => out.push(Expected {
            name: name.into(),
            role,
            kind: Kind::Dim,
            optional: false,
            elem: spec.dtype.into(),
        }),
        Dim::Fixed(v) => fixed.push((name.to_string(), v)),
    };
    let mut out = Vec::new();
    match &spec.family {
        Family::Tensor(program) => return program_params(program),
        Family::Matmul(m) => {
            // A contraction in index notation names its own operands and dimensions.
            let names = m.names.as_deref();
            let name =
                |default: &'static str, f: fn(&crate::model::MatmulNames) -> &str| -> String {
                    names.map_or(default.to_string(), |n| f(n).to_string())
                };
            let (a, b, c) = (
                name("a", |n| &n.a),
                name("b", |n| &n.b),
                name("c", |n| &n.c),
            );
            let (mm, nn, kk) = (
                name("m", |n| &n.m),
                name("n", |n| &n.n),
                name("k", |n| &n.k),
            );
            let batch_names = match names {
                Some(n) => n.batch.clone(),
                None => vec!["batch".to_string()],
            };
            out.push(buf(&a, Role::A, Access::Read));
            out.push(buf(&b, Role::B, Access::Read));
            out.push(buf(
                &c,
                Role::C,
                if m.beta {
                    Access::ReadWrite
                } else {
                    Access::Write
                },
            ));
            if m.bias {
                out.push(Expected {
                    elem: DType::F32.into(),
                    ..buf("bias", Role::Bias, Access::Read)
                });
            }
            if m.batched {
                match &batch_names[..] {
                    [one] => dim(one, Role::Batch, m.batch, &mut out),
                    // Several batch axes are run-time extents (the parser folds no fixed ones).
                    several => {
                        for (i, name) in several.iter().enumerate() {
                            let role = if i == 0 {
                                Role::Batch
                            } else {
                                Role::BatchAxis(i as u16)
                            };
                            dim(name, role, Dim::Runtime, &mut out);
                        }
                    }
                }
            }
            dim(&mm, Role::M, m.m, &mut out);
            dim(&nn, Role::N, m.n, &mut out);
            dim(&kk, Role::K, m.k, &mut out);
            for (on, name, role) in [
                (m.alpha, "alpha", Role::Alpha),
                (m.beta, "beta", Role::Beta),
            ] {
                if on {
                    out.push(Expected {
                        name: name.into(),
                        role,
                        kind: Kind::Scalar,
                        optional: false,
                        elem: DType::F32.into(),
                    });
                }
            }
        }
    }
    (out, fixed)
}

/// A tensor program's parameters: its inputs, outputs, run-time dimensions and scalars, by their names in the
/// program. A dimension may be left out when the buffer lengths determine it ([`inferable`]).
fn program_params(program: &Program) -> (Vec<Expected>, Vec<(String, u64)>) {
    let elem = |e: Elem| match e {
        Elem::Float => program.dtype.into(),
        Elem::I64 => ElemType {
            name: "i64",
            path: "i64",
        },
        Elem::I32 => ElemType {
            name: "i32",
            path: "i32",
        },
        Elem::Bool => ElemType {
            name: "bool",
            path: "bool",
        },
    };
    let index = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
    let mut out = Vec::new();
    let mut fixed = Vec::new();
    for (i, t) in program.inputs.iter().enumerate() {
        out.push(Expected {
            name: t.name.clone(),
            role: Role::Input(index(i)),
            kind: Kind::Buffer(Access::Read),
            optional: false,
            elem: elem(t.elem),
        });
    }
    for (i, s) in program.outputs() {
        out.push(Expected {
            name: s.name.clone(),
            role: Role::Output(index(i)),
            kind: Kind::Buffer(Access::Write),
            optional: false,
            elem: elem(s.elem),
        });
    }
    for (i, d) in program.dims.iter().enumerate() {
        match d.size {
            Dim::Fixed(v) => fixed.push((d.name.clone(), v)),
            Dim::Runtime => out.push(Expected {
                name: d.name.clone(),
                role: Role::Extent(index(i)),
                kind: Kind::Dim,
                optional: true,
                elem: program.dtype.into(),
            }),
        }
    }
    for (i, name) in program.params.iter().enumerate() {
        out.push(Expected {
            name: name.clone(),
            role: Role::Param(index(i)),
            kind: Kind::Scalar,
            optional: false,
            elem: DType::F32.into(),
        });
    }
    (out, fixed)
}

/// Whether every dimension of `program` follows from the buffer lengths once the dimensions in `given` are known:
/// a buffer whose axes hold exactly one unknown dimension determines it (its length divided by the others'
/// product), and so on until nothing changes. The runtime infers them the same way.
pub fn inferable(program: &Program, given: &[usize]) -> Vec<usize> {
    let mut known: Vec<bool> = program
        .dims
        .iter()
        .enumerate()
        .map(|(i, d)| d.size != Dim::Runtime || given.contains(&i))
        .collect();
    let buffers: Vec<&[usize]> = program
        .inputs
        .iter()
        .map(|t| t.axes.as_slice())
        .chain(program.outputs().map(|(_, s)| s.axes.as_slice()))
        .collect();
    loop {
        let mut changed = false;
        for axes in &buffers {
            let unknown: Vec<usize> = axes.iter().copied().filter(|&a| !known[a]).collect();
            if let [only] = unknown[..] {
                known[only] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    (0..program.dims.len()).filter(|&i| !known[i]).collect()
}

fn describe(e: &Expected) -> String {
    let dtype = e.elem.path;
    let ty = match e.kind {
        Kind::Buffer(Access::Read) => format!("&CudaSlice<{dtype}>"),
        Kind::Buffer(_) => format!("&mut CudaSlice<{dtype}>"),
        Kind::Dim => "usize".into(),
        Kind::Scalar => dtype.into(),
    };
    format!("{}: {ty}", e.name)
}

/// Integer types accepted for dimensions; the wrapper converts them with a checked conversion.
pub const DIM_TYPES: &[&str] = &["usize", "u32", "u64", "i32", "i64", "isize"];

/// Checks `sig` against `spec`.
///
/// # Errors
/// Every mistake at once, each spanned to the offending token: a missing or unknown parameter, a wrong element
/// type, a written buffer that is not `&mut` (or a read-only one that is), a dimension the spec already fixes,
/// generics, `async`, a receiver, a return type.
pub fn bind(spec: &Spec, sig: &syn::Signature) -> syn::Result<Binding> {
    let mut errors = Errors::new();
    let family = spec.family_name();
    if let Some(t) = &sig.constness {
        errors.push_spanned(t, "an optiml kernel cannot be `const`");
    }
    if let Some(t) = &sig.asyncness {
        errors.push_spanned(
            t,
            "an optiml kernel cannot be `async`: the launch is already asynchronous on its stream",
        );
    }
    if let Some(t) = &sig.unsafety {
        errors.push_spanned(
            t,
            "remove `unsafe`: the generated function checks its arguments and is safe to call",
        );
    }
    if let Some(t) = &sig.abi {
        errors.push_spanned(
            t,
            "remove the ABI: the generated function is a Rust function",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push_spanned(
            &sig.generics,
            "an optiml kernel cannot be generic: the spec fixes the element type",
        );
    }
    if let Some(v) = &sig.variadic {
        errors.push_spanned(v, "an optiml kernel cannot be variadic");
    }
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        errors.push_spanned(
            ty,
            "remove the return type: the generated function returns `Result<(), optiml::Error>`",
        );
    }

    let (expect, fixed) = expected(spec);
    let renames = renames(&expect, &fixed, sig);
    let mut params = Vec::new();
    for input in &sig.inputs {
        let pat = match input {
            syn::FnArg::Receiver(r) => {
                errors.push_spanned(r, "an optiml kernel is a free function: remove `self`");
                continue;
            }
            syn::FnArg::Typed(pat) => pat,
        };
        let syn::Pat::Ident(ident) = &*pat.pat else {
            errors.push_spanned(&pat.pat, "use a plain parameter name here");
            continue;
        };
        let name = ident.ident.to_string();
        let name = name.strip_prefix("r#").unwrap_or(&name).to_string();
        let Some(e) = expect.iter().find(|e| e.name == name) else {
            let message = if name == "stream" {
                "do not declare the stream: the generated function takes `stream: &CudaStream` first by itself"
                    .to_string()
            } else if let Some((_, v)) = fixed.iter().find(|(f, _)| *f == name) {
                format!("`{name}` is fixed to {v} by the spec: remove this parameter")
            } else if let Some((_, to)) = renames.iter().find(|(from, _)| *from == name) {
                format!(
                    "unexpected parameter `{name}`: rename it to `{to}` (parameters are matched by name; a {family} \
                     kernel takes `{}`)",
                    expect
                        .iter()
                        .find(|e| e.name == *to)
                        .map_or_else(String::new, describe)
                )
            } else {
                let list: Vec<String> = expect
                    .iter()
                    .map(|e| format!("`{}`", describe(e)))
                    .collect();
                format!(
                    "unexpected parameter `{name}`: a {family} kernel takes {}",
                    list.join(", ")
                )
            };
            errors.push_spanned(&ident.ident, message);
            continue;
        };
        if params.iter().any(|p: &Param| p.role == e.role) {
            errors.push_spanned(&ident.ident, format!("`{name}` is given twice"));
            continue;
        }
        if let Err(msg) = check_type(&pat.ty, e, &name) {
            errors.push_spanned(&pat.ty, msg);
        }
        params.push(Param {
            name,
            role: e.role,
            kind: e.kind,
        });
    }
    for e in &expect {
        // A parameter the user named otherwise already has its error, saying to rename it.
        let renamed = renames.iter().any(|(_, to)| *to == e.name);
        if !e.optional && !renamed && !params.iter().any(|p| p.role == e.role) {
            errors.push(syn::Error::new(
                sig.ident.span(),
                format!("missing parameter `{}` for a {family} kernel", describe(e)),
            ));
        }
    }
    if let Family::Tensor(program) = &spec.family {
        let given: Vec<usize> = params
            .iter()
            .filter_map(|p| match p.role {
                Role::Extent(i) => Some(i as usize),
                _ => None,
            })
            .collect();
        let unknown = inferable(program, &given);
        if !unknown.is_empty() {
            let names: Vec<String> = unknown
                .iter()
                .map(|&i| format!("`{}: usize`", program.dims[i].name))
                .collect();
            errors.push(syn::Error::new(
                sig.ident.span(),
                format!(
                    "missing dimension parameter {}: the buffer lengths do not determine {}",
                    names.join(" or "),
                    if unknown.len() == 1 { "it" } else { "them" }
                ),
            ));
        }
    }
    errors.propagate()?;
    Ok(Binding { params })
}

/// For each declared parameter whose name the spec does not know, the missing parameter of the same kind it most
/// likely is: the expected ones nobody declared, taken in order per kind (`lhs, rhs, out` → `a, b, c`).
fn renames(
    expect: &[Expected],
    fixed: &[(String, u64)],
    sig: &syn::Signature,
) -> Vec<(String, String)> {
    let declared: Vec<(String, Option<Kind>)> = sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            syn::FnArg::Typed(pat) => match &*pat.pat {
                syn::Pat::Ident(i) => {
                    let name = i.ident.to_string();
                    let name = name.strip_prefix("r#").unwrap_or(&name).to_string();
                    Some((name, kind_of(&pat.ty)))
                }
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    let mut free: Vec<&Expected> = expect
        .iter()
        .filter(|e| !declared.iter().any(|(n, _)| *n == e.name))
        .collect();
    let mut out = Vec::new();
    for (name, kind) in &declared {
        // The stream and a dimension the spec fixes have their own errors.
        if name == "stream"
            || expect.iter().any(|e| e.name == *name)
            || fixed.iter().any(|(f, _)| f == name)
        {
            continue;
        }
        let Some(kind) = kind else { continue };
        let fits = |e: &&Expected| match (e.kind, kind) {
            (Kind::Buffer(Access::Read), Kind::Buffer(Access::Read)) => true,
            (Kind::Buffer(want), Kind::Buffer(got)) => want != Access::Read && *got != Access::Read,
            (want, got) => want == *got,
        };
        if let Some(at) = free.iter().position(fits) {
            out.push((name.clone(), free.remove(at).name.clone()));
        }
    }
    out
}

/// What a declared parameter's type makes it: a read or written buffer, a dimension or a scalar.
fn kind_of(ty: &syn::Type) -> Option<Kind> {
    if let syn::Type::Reference(r) = ty {
        cuda_slice_elem(&r.elem)?;
        return Some(Kind::Buffer(if r.mutability.is_some() {
            Access::Write
        } else {
            Access::Read
        }));
    }
    let t = last_ident(ty)?;
    if DIM_TYPES.contains(&t.as_str()) {
        Some(Kind::Dim)
    } else if ["f32", "f16", "bf16", "f64"].contains(&t.as_str()) {
        Some(Kind::Scalar)
    } else {
        None
    }
}

fn check_type(ty: &syn::Type, e: &Expected, name: &str) -> Result<(), String> {
    let (dtype, path) = (e.elem.name, e.elem.path);
    match e.kind {
        Kind::Buffer(access) => {
            let want_mut = access != Access::Read;
            let shown = describe(e);
            let syn::Type::Reference(r) = ty else {
                return Err(format!(
                    "expected `{shown}`: buffers are borrowed device slices"
                ));
            };
            let Some(elem) = cuda_slice_elem(&r.elem) else {
                return Err(format!("expected `{shown}`"));
            };
            if elem != dtype {
                let why = if e.role == Role::Bias {
                    " (a bias is f32 whatever the operands hold)".to_string()
                } else {
                    format!(" (the spec says {dtype})")
                };
                return Err(format!(
                    "`{name}` must hold `{path}` elements{why}, not `{elem}`"
                ));
            }
            match (want_mut, r.mutability.is_some()) {
                (true, false) => Err(format!(
                    "the kernel writes `{name}`: take it as `&mut CudaSlice<{path}>`"
                )),
                (false, true) => Err(format!(
                    "the kernel only reads `{name}`: take it as `&CudaSlice<{path}>`"
                )),
                _ => Ok(()),
            }
        }
        Kind::Dim => match last_ident(ty) {
            Some(t) if DIM_TYPES.contains(&t.as_str()) => Ok(()),
            _ => Err(format!(
                "`{name}` is a dimension: use an integer type ({})",
                DIM_TYPES.join(", ")
            )),
        },
        Kind::Scalar => match last_ident(ty) {
            Some(t) if t == dtype => Ok(()),
            _ => Err(format!("`{name}` is a scalar: use `{path}`")),
        },
    }
}

fn last_ident(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => {
            let seg = p.path.segments.last()?;
            seg.arguments.is_none().then(|| seg.ident.to_string())
        }
        syn::Type::Paren(p) => last_ident(&p.elem),
        syn::Type::Group(g) => last_ident(&g.elem),
        _ => None,
    }
}

/// `CudaSlice<T>` (any path prefix) → `T`'s name.
fn cuda_slice_elem(ty: &syn::Type) -> Option<String> {
    let syn::Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    if seg.ident != "CudaSlice" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &seg.arguments else {
        return None;
    };
    if args.args.len() != 1 {
        return None;
    }
    match args.args.first()? {
        syn::GenericArgument::Type(t) => {
            last_ident(t).or_else(|| Some(quote::quote!(#t).to_string()))
        }
        other => Some(quote::quote!(#other).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn sig(text: &str) -> syn::Signature {
        syn::parse_str::<syn::ForeignItemFn>(text).unwrap().sig
    }

    fn err(spec: &str, text: &str) -> String {
        let e = bind(&parse(spec).unwrap(), &sig(text)).unwrap_err();
        e.into_iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_expected_signature_binds() {
        for text in [
            "bmm, f32, alpha, beta, bias",
            "y[b, i, j, k] = sum(l) x[b, i, j, l] * w[l, k]",
            "c[i, j] = sum(k) a[i, k] * b[k, j] where i <= k <= j, bf16",
            "matmul, bf16",
        ] {
            let Ok(spec) = parse(text) else { continue };
            let shown = expected_signature(&spec);
            bind(&spec, &sig(&format!("{shown};")))
                .unwrap_or_else(|e| panic!("{text}: {shown}: {e}"));
        }
        assert_eq!(
            expected_signature(&parse("y[b, i, j, k] = sum(l) x[b, i, j, l] * w[l, k]").unwrap()),
            "fn k(x: &CudaSlice<f32>, w: &CudaSlice<f32>, y: &mut CudaSlice<f32>, b: usize, i: usize, j: usize, \
             k: usize, l: usize)"
        );
    }

    #[test]
    fn other_names_get_one_rename_hint_each_and_no_missing_parameter_errors() {
        let e = err(
            "matmul",
            "fn mm(lhs: &CudaSlice<f32>, rhs: &CudaSlice<f32>, out: &mut CudaSlice<f32>, rows: usize, n: usize, \
             k: usize);",
        );
        assert_eq!(e.lines().count(), 4, "{e}");
        for (from, to) in [("lhs", "a"), ("rhs", "b"), ("out", "c"), ("rows", "m")] {
            assert!(
                e.contains(&format!(
                    "unexpected parameter `{from}`: rename it to `{to}`"
                )),
                "{e}"
            );
        }
        assert!(!e.contains("missing parameter"), "{e}");
        // Without a free parameter of the same kind, the plain message lists what the kernel takes.
        let e = err(
            "relu",
            "fn r(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>, extra: &CudaSlice<f32>);",
        );
        assert!(e.contains("unexpected parameter `extra`: a"), "{e}");
    }

    #[test]
    fn binds_in_user_order() {
        let b = bind(
            &parse("bmm, f32").unwrap(),
            &sig("fn bmm(c: &mut CudaSlice<f32>, a: &CudaSlice<f32>, b: &cudarc::driver::CudaSlice<f32>, batch: usize, m: u32, n: i64, k: usize);"),
        )
        .unwrap();
        let roles: Vec<Role> = b.params.iter().map(|p| p.role).collect();
        assert_eq!(
            roles,
            [
                Role::C,
                Role::A,
                Role::B,
                Role::Batch,
                Role::M,
                Role::N,
                Role::K
            ]
        );
        let other = bind(
            &parse("bmm, f32").unwrap(),
            &sig("fn other(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);"),
        )
        .unwrap();
        assert_eq!(b.canonical(), other.canonical());
    }

    #[test]
    fn elementwise_maps_take_x_y_out_s_and_an_optional_n() {
        let spec = parse("relu").unwrap();
        for ok in [
            "fn r(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);",
            "fn r(out: &mut CudaSlice<f32>, x: &CudaSlice<f32>, n: usize);",
        ] {
            assert!(bind(&spec, &sig(ok)).is_ok(), "{ok}");
        }
        let e = err(
            "relu",
            "fn r(input: &CudaSlice<f32>, out: &mut CudaSlice<f32>);",
        );
        assert!(e.contains("unexpected parameter `input`"), "{e}");
        assert!(e.contains("`x: &CudaSlice<f32>`"), "{e}");
        let e = err(
            "y = x * s",
            "fn r(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);",
        );
        assert!(e.contains("missing parameter `s: f32`"), "{e}");
        assert!(
            bind(
                &parse("elementwise add of two tensors, bf16").unwrap(),
                &sig("fn r(x: &CudaSlice<bf16>, y: &CudaSlice<bf16>, out: &mut CudaSlice<bf16>);")
            )
            .is_ok()
        );
    }

    #[test]
    fn reports_every_mistake() {
        let e = err(
            "batched matmul, f32, k=64",
            "fn bmm(a: &CudaSlice<f64>, b: &mut CudaSlice<f32>, c: &CudaSlice<f32>, m: f32, n: usize, k: usize, q: usize, stream: usize) -> u32;",
        );
        for want in [
            "remove the return type",
            "must hold `f32` elements (the spec says f32), not `f64`",
            "the kernel only reads `b`",
            "the kernel writes `c`",
            "`m` is a dimension",
            "`k` is fixed to 64 by the spec",
            // `q` is the one free dimension's only candidate.
            "unexpected parameter `q`: rename it to `batch`",
            "do not declare the stream",
        ] {
            assert!(e.contains(want), "missing {want:?} in:\n{e}");
        }
    }

    #[test]
    fn sixteen_bit_operands_keep_an_f32_bias_and_scales() {
        let spec = parse("matmul, bf16, alpha, bias").unwrap();
        assert!(
            bind(
                &spec,
                &sig("fn g(a: &CudaSlice<half::bf16>, b: &CudaSlice<bf16>, c: &mut CudaSlice<optiml::half::bf16>, bias: &CudaSlice<f32>, m: usize, n: usize, k: usize, alpha: f32);"),
            )
            .is_ok()
        );
        let e = err(
            "matmul, f16, alpha, bias",
            "fn g(a: &CudaSlice<f32>, b: &CudaSlice<half::f16>, c: &mut CudaSlice<half::bf16>, bias: &CudaSlice<half::f16>, m: usize, n: usize, k: usize, alpha: half::f16);",
        );
        for want in [
            "`a` must hold `half::f16` elements (the spec says f16), not `f32`",
            "`c` must hold `half::f16` elements (the spec says f16), not `bf16`",
            "`bias` must hold `f32` elements (a bias is f32 whatever the operands hold), not `f16`",
            "`alpha` is a scalar: use `f32`",
        ] {
            assert!(e.contains(want), "missing {want:?} in:\n{e}");
        }
        assert!(!e.contains("`b` must"), "{e}");
        let e = err("gemm, bf16", "fn g(m: usize, n: usize, k: usize);");
        assert!(
            e.contains("missing parameter `a: &CudaSlice<half::bf16>`"),
            "{e}"
        );
    }

    #[test]
    fn beta_makes_c_read_write() {
        let b = bind(
            &parse("C = alpha·A·B + beta·C").unwrap(),
            &sig("fn g(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, m: usize, n: usize, k: usize, alpha: f32, beta: f32);"),
        )
        .unwrap();
        assert_eq!(
            b.get(Role::C).unwrap().kind,
            Kind::Buffer(Access::ReadWrite)
        );
    }
}
