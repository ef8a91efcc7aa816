//! The attribute's expansion: parse the spec, bind the signature, emit the wrapper.

use optiml_spec::program::{Elem, Program};
use optiml_spec::{Binding, DType, Dim, Family, KernelId, Role, Spec, env, signature};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use std::path::PathBuf;

pub(crate) fn kernel(args: TokenStream, input: TokenStream) -> syn::Result<TokenStream> {
    let args = optiml_spec::KernelArgs::parse(args)?;
    let lit = &args.spec;
    let item = parse_item(input)?;
    let spec = optiml_spec::parse(&lit.value()).map_err(|e| syn::Error::new(lit.span(), e))?;
    let binding = signature::bind(&spec, &item.sig)?;
    if let Some((lit, seed)) = &args.seed {
        check_seed(lit, seed, &spec)?;
    }
    let id = KernelId::seeded(&spec, &binding, args.seed.as_ref().map(|(_, s)| s));
    let include = generated_file(&item.sig.ident, &spec, &id)?;
    Ok(emit(&item, &spec, &binding, &include))
}

/// What the macro can check of a seed before the build script compiles and verifies it: the spec has the ABI a
/// seed is written against (a tensor program's), and the file defines the `__global__` function. The file is
/// read relative to the package root, as the build script reads it.
fn check_seed(lit: &syn::LitStr, seed: &optiml_spec::Seed, spec: &Spec) -> syn::Result<()> {
    if !matches!(&spec.family, Family::Tensor(_)) {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "a seed kernel is written against the tensor-program ABI, which tensor programs have; `{}` is \
                 not one (`cargo optiml explain` shows a program's ABI)",
                spec.canonical()
            ),
        ));
    }
    let Some(root) = env::var_os("CARGO_MANIFEST_DIR") else {
        return Ok(());
    };
    let path = PathBuf::from(root).join(&seed.file);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        syn::Error::new(
            lit.span(),
            format!(
                "the seed file `{}` cannot be read ({}); seed paths are relative to the package root (the \
                 folder of its Cargo.toml)",
                seed.file,
                e.kind()
            ),
        )
    })?;
    if !seed.is_defined_in(&text) {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`{}` defines no `__global__` function `{}`",
                seed.file, seed.function
            ),
        ));
    }
    Ok(())
}

fn parse_item(input: TokenStream) -> syn::Result<syn::ForeignItemFn> {
    match syn::parse2::<syn::ForeignItemFn>(input.clone()) {
        Ok(item) => Ok(item),
        Err(e) => match syn::parse2::<syn::ItemFn>(input) {
            Ok(f) => Err(syn::Error::new_spanned(
                &f.block,
                "remove the body: optiml generates the kernel from the spec; end the signature with `;`",
            )),
            Err(_) => Err(syn::Error::new(
                e.span(),
                "#[optiml::kernel] goes on a bodyless function signature, e.g. `pub fn bmm(a: &CudaSlice<f32>, …);`",
            )),
        },
    }
}

/// `$OUT_DIR/optiml/kernel-<id>.rs`, after checking it is there: a missing build script or a spec the build
/// script skipped would otherwise surface as an unreadable `include!` error.
fn generated_file(ident: &syn::Ident, spec: &Spec, id: &KernelId) -> syn::Result<String> {
    let Some(out_dir) = env::var_os("OUT_DIR") else {
        return Err(syn::Error::new(
            ident.span(),
            "this crate has no build script, so no kernel was generated: add `optiml-build` to \
             [build-dependencies] and a build.rs with `optiml_build::Builder::new().compile().unwrap_or_else(|e| e.exit());`",
        ));
    };
    let path = PathBuf::from(out_dir).join(id.generated_file());
    if !path.is_file() {
        return Err(syn::Error::new(
            ident.span(),
            format!(
                "optiml-build did not generate kernel `{ident}` ({}, id {}): does build.rs call \
                 `optiml_build::Builder::new().compile()`, and does it scan this file? (see its cargo warnings)",
                spec.canonical(),
                id.short()
            ),
        ));
    }
    Ok(path.to_string_lossy().into_owned())
}

fn emit(item: &syn::ForeignItemFn, spec: &Spec, binding: &Binding, include: &str) -> TokenStream {
    let attrs = &item.attrs;
    let vis = &item.vis;
    let ident = &item.sig.ident;
    let name = ident.to_string();
    let inputs = item.sig.inputs.iter();
    let canonical = spec.canonical();
    let doc = format!(" Launches the optiml kernel `{canonical}` on `stream`.");
    let arg = |role: Role| binding.get(role).map(|p| format_ident!("{}", p.name));
    let dim = |role: Role, fixed: Dim, label: &str| match (arg(role), fixed) {
        (Some(id), _) => quote!(::optiml::runtime::dim(#name, #label, #id)?),
        (None, Dim::Fixed(v)) => {
            let v = v as usize;
            quote!(#v)
        }
        (None, Dim::Runtime) => quote!(0usize),
    };
    let scalar = |role: Role, default: f32| match arg(role) {
        Some(id) => quote!(#id),
        None => quote!(#default),
    };
    let call = match &spec.family {
        Family::Matmul(m) => {
            let (a, b, c) = (arg(Role::A), arg(Role::B), arg(Role::C));
            let bias = match arg(Role::Bias) {
                Some(id) => quote!(::core::option::Option::Some(#id)),
                None => quote!(::core::option::Option::None),
            };
            // A contraction over several batch dimensions launches their product.
            let axes: Vec<&optiml_spec::Param> = binding
                .params
                .iter()
                .filter(|p| matches!(p.role, Role::Batch | Role::BatchAxis(_)))
                .collect();
            let batch = if axes.len() > 1 {
                let each = axes.iter().map(|p| {
                    let (id, label) = (format_ident!("{}", p.name), &p.name);
                    quote!(::optiml::runtime::dim(#name, #label, #id)?)
                });
                quote!(::optiml::runtime::dims_product(#name, "batch", &[#(#each),*])?)
            } else {
                dim(Role::Batch, m.batch, "batch")
            };
            let (mm, nn, kk) = (
                dim(Role::M, m.m, "m"),
                dim(Role::N, m.n, "n"),
                dim(Role::K, m.k, "k"),
            );
            let (alpha, beta) = (scalar(Role::Alpha, 1.0), scalar(Role::Beta, 0.0));
            let (shared_a, shared_b) = (m.shared_a, m.shared_b);
            quote! {
                ::optiml::runtime::matmul::launch(&KERNEL, stream, ::optiml::runtime::matmul::MatmulArgs {
                    a: #a, b: #b, c: #c, bias: #bias, batch: #batch, m: #mm, n: #nn, k: #kk, alpha: #alpha, beta: #beta,
                    shared_a: #shared_a, shared_b: #shared_b,
                })
            }
        }
        Family::Tensor(program) => program_call(program, binding, &name),
    };
    quote! {
        #(#attrs)*
        #[doc = ""]
        #[doc = #doc]
        #[doc = ""]
        #[doc = " # Errors"]
        #[doc = " [`optiml::Error`] when an argument does not fit the dimensions, no compiled variant fits the GPU,"]
        #[doc = " or the driver fails; nothing is launched then."]
        #[allow(clippy::too_many_arguments)]
        #vis fn #ident(
            stream: &::optiml::cudarc::driver::CudaStream,
            #(#inputs),*
        ) -> ::core::result::Result<(), ::optiml::Error> {
            static KERNEL: ::optiml::runtime::KernelModule =
                ::optiml::runtime::KernelModule::new(#name, include!(#include));
            #call
        }
    }
}

/// The launch of a tensor program: its signature as a `static`, then the buffers, dimensions and scalars in the
/// kernel's order, whatever order the user declared them in.
fn program_call(program: &Program, binding: &Binding, name: &str) -> TokenStream {
    let rt = quote!(::optiml::runtime::program);
    let elem = |e: Elem| match (e, program.dtype) {
        (Elem::Float, DType::F32) => quote!(#rt::Elem::F32),
        (Elem::Float, DType::Bf16) => quote!(#rt::Elem::Bf16),
        (Elem::Float, DType::F16) => quote!(#rt::Elem::F16),
        (Elem::I64, _) => quote!(#rt::Elem::I64),
        (Elem::I32, _) => quote!(#rt::Elem::I32),
        (Elem::Bool, _) => quote!(#rt::Elem::Bool),
    };
    let tensor = |name: &str, axes: &[usize], e: Elem| {
        let axes = axes.iter().map(|&a| a as u16);
        let elem = elem(e);
        quote!(#rt::TensorSig { name: #name, axes: &[#(#axes),*], elem: #elem })
    };
    let inputs = program
        .inputs
        .iter()
        .map(|t| tensor(&t.name, &t.axes, t.elem));
    let outputs = program
        .outputs()
        .map(|(_, s)| tensor(&s.name, &s.axes, s.elem));
    let dims = program.dims.iter().map(|d| {
        let dim_name = &d.name;
        match d.size {
            Dim::Fixed(v) => {
                let v = v as usize;
                quote!((#dim_name, ::core::option::Option::Some(#v)))
            }
            Dim::Runtime => quote!((#dim_name, ::core::option::Option::None)),
        }
    });
    let arg = |role: Role| binding.get(role).map(|p| format_ident!("{}", p.name));
    let index = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
    let in_args = (0..program.inputs.len()).map(|i| {
        let id = arg(Role::Input(index(i)));
        quote!(#rt::In::from(#id))
    });
    let out_args = program.outputs().map(|(i, _)| {
        let id = arg(Role::Output(index(i)));
        quote!(#rt::Out::from(#id))
    });
    let dim_args = program.dims.iter().enumerate().map(|(i, d)| {
        let label = &d.name;
        match arg(Role::Extent(index(i))) {
            Some(id) => {
                quote!(::core::option::Option::Some(::optiml::runtime::dim(#name, #label, #id)?))
            }
            None => quote!(::core::option::Option::None),
        }
    });
    let params = (0..program.params.len()).map(|i| arg(Role::Param(index(i))));
    quote! {
        static SIGNATURE: #rt::Signature = #rt::Signature {
            inputs: &[#(#inputs),*],
            outputs: &[#(#outputs),*],
            dims: &[#(#dims),*],
        };
        #rt::launch(&KERNEL, stream, &SIGNATURE, #rt::ProgramArgs {
            inputs: &[#(#in_args),*],
            outputs: &mut [#(#out_args),*],
            dims: &[#(#dim_args),*],
            params: &[#(#params),*],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_with(out_dir: &std::path::Path, attr: &str, item: &str) -> Result<String, String> {
        // SAFETY: tests in this module are the only readers of OUT_DIR in this process.
        unsafe { std::env::set_var("OUT_DIR", out_dir) };
        kernel(attr.parse().unwrap(), item.parse().unwrap())
            .map(|t| prettyplease::unparse(&syn::parse2(t).unwrap()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn expands_to_a_checked_launcher() {
        let dir = std::env::temp_dir().join(format!("optiml-macro-test-{}", std::process::id()));
        let spec = optiml_spec::parse("bmm").unwrap();
        let sig: syn::ForeignItemFn = syn::parse_str(
            "pub fn bmm(a: &CudaSlice<f32>, b: &CudaSlice<f32>, c: &mut CudaSlice<f32>, batch: usize, m: usize, n: usize, k: usize);",
        )
        .unwrap();
        let id = KernelId::new(&spec, &signature::bind(&spec, &sig.sig).unwrap());
        let file = dir.join(id.generated_file());
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "()").unwrap();
        let text = expand_with(&dir, "\"bmm\"", &quote!(#sig).to_string()).unwrap();
        assert!(
            text.contains("pub fn bmm(\n    stream: &::optiml::cudarc::driver::CudaStream,"),
            "{text}"
        );
        assert!(
            text.contains("::optiml::runtime::dim(\"bmm\", \"m\", m)?"),
            "{text}"
        );
        assert!(
            text.contains("bias: ::core::option::Option::None"),
            "{text}"
        );
        assert!(text.contains(&id.short()), "{text}");
        std::fs::remove_file(file).unwrap();
        let missing = expand_with(&dir, "\"bmm\"", &quote!(#sig).to_string()).unwrap_err();
        assert!(
            missing.contains("optiml-build did not generate kernel `bmm`"),
            "{missing}"
        );
    }
}
