//! The pass structure of a reduction program (rows or columns), shared by both generators.
//!
//! Every statement of the lowered program is a *scalar* (one value per item: a row or a column; computed once,
//! kept in registers), a *reduction* (a scalar that is the whole of a reduction) or an *element* (one value per
//! element of the item; recomputed inline wherever it is needed, never stored unless it is an output).
//! Reductions run in passes over the item's elements: each as early as the scalars its body reads allow, so
//! independent reductions (`max` and `argmax`, or `sum x` and `sum x²`) share one pass over the data. A final
//! pass writes the element outputs.

use super::emit;
use optiml_spec::program::{Binary, Elem, Expr, Program, Reduce, Unary};

/// What a statement is per item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// One value per item, from other scalars and per-item inputs.
    Scalar,
    /// One value per item, a reduction over the item's elements.
    Reduction(Reduce),
    /// One value per element.
    Element,
}

/// What a set of expressions needs at an element.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Need {
    /// Element statements to compute first, in statement order.
    pub elems: Vec<usize>,
    /// Inputs with the reduced dimensions (read per element), in input order.
    pub element_inputs: Vec<usize>,
    /// Scalar and reduction statements read.
    pub scalars: Vec<usize>,
}

/// The passes of a reduction program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Passes {
    /// Per statement.
    pub role: Vec<Role>,
    /// The reduction statements of each reduction pass, in statement order.
    pub reductions: Vec<Vec<usize>>,
    /// The scalar statements computed before reduction pass `k` (`stages[reductions.len()]`: after the last).
    pub stages: Vec<Vec<usize>>,
    /// What each pass needs at an element: the reduction passes, then the final pass (present iff there are
    /// element outputs).
    pub need: Vec<Need>,
    /// The element outputs (written by the final pass), in statement order.
    pub element_outputs: Vec<usize>,
    /// The scalar and reduction outputs (written once per item), in statement order.
    pub scalar_outputs: Vec<usize>,
    /// The inputs without reduced dimensions (one value per item, or per program), in input order.
    pub item_inputs: Vec<usize>,
    /// The element inputs that vary per item and are read by two passes or more: those worth keeping on chip.
    pub cached: Vec<usize>,
    /// Mean and spread computed together in one pass ([`Passes::fuse_moments`]): `(m, q)` where `m` is the
    /// mean of a body and `q` the sum or mean of the body's squared distance to `m`. Empty unless a generator
    /// asks for the fusion.
    pub moments: Vec<(usize, usize)>,
    /// Max and shifted exponential sum computed together in one pass ([`Passes::fuse_online`]): `(m, s)`
    /// where `m` is the max of a body and `s` the sum or mean of `exp(body − m)`. Empty unless a generator
    /// asks for the fusion.
    pub online: Vec<(usize, usize)>,
}

impl Passes {
    /// Stores each reduction's partial `a{j}` (and an arg reduction's index `i{j}`) of `reds` in the shared
    /// scratch, at partial `mine`: `at(array, slot, part)` addresses `red_f` / `red_i`, which rows and columns lay
    /// out differently.
    pub(crate) fn store_partials(
        &self,
        c: &mut emit::Code,
        reds: &[usize],
        mine: &str,
        at: &dyn Fn(&str, usize, &str) -> String,
    ) {
        let mut arg_slot = 0;
        for (slot, &j) in reds.iter().enumerate() {
            c.line(format!("{} = a{j};", at("red_f", slot, mine)));
            if matches!(self.role[j], Role::Reduction(op) if op.is_arg()) {
                c.line(format!("{} = i{j};", at("red_i", arg_slot, mine)));
                arg_slot += 1;
            }
        }
    }

    /// Folds the `parts` stored partials of each reduction of `reds` in partial order (the first index wins an
    /// arg reduction's ties), into `a{j}` (and `i{j}`): the fixed order that makes a run repeat bit for bit.
    pub(crate) fn fold_partials(
        &self,
        c: &mut emit::Code,
        reds: &[usize],
        parts: &str,
        at: &dyn Fn(&str, usize, &str) -> String,
    ) {
        let mut arg_slot = 0;
        for (slot, &j) in reds.iter().enumerate() {
            if let Some((m, s)) = self.online_of(j) {
                // The pair merges on the max's turn; both partials sit in their own slots.
                let s_slot = reds.iter().position(|&r| r == s);
                if let (true, Some(s_slot)) = (j == m, s_slot) {
                    c.line(format!(
                        "a{m} = {}; a{s} = {};",
                        at("red_f", slot, "0"),
                        at("red_f", s_slot, "0")
                    ));
                    c.line("#pragma unroll");
                    c.line(format!(
                        "for (int w = 1; w < {parts}; ++w) optiml_p::online_merge(a{m}, a{s}, {}, {});",
                        at("red_f", slot, "w"),
                        at("red_f", s_slot, "w")
                    ));
                }
                continue;
            }
            match self.role[j] {
                Role::Reduction(op) if op.is_arg() => {
                    c.line(format!("a{j} = {};", at("red_f", slot, "0")));
                    c.line(format!("i{j} = {};", at("red_i", arg_slot, "0")));
                    c.line("#pragma unroll");
                    c.open(format!("for (int w = 1; w < {parts}; ++w) {{"));
                    c.line(format!(
                        "const float ov = {}; const long long oi = {};",
                        at("red_f", slot, "w"),
                        at("red_i", arg_slot, "w")
                    ));
                    c.line(format!(
                        "if (optiml_p::arg_better<{}>(ov, oi, a{j}, i{j})) {{ a{j} = ov; i{j} = oi; }}",
                        op == Reduce::Argmax
                    ));
                    c.close("}");
                    arg_slot += 1;
                }
                Role::Reduction(op) => {
                    c.line(format!("a{j} = {};", at("red_f", slot, "0")));
                    c.line("#pragma unroll");
                    c.line(format!(
                        "for (int w = 1; w < {parts}; ++w) a{j} = {}::op(a{j}, {});",
                        emit::reduce_op(op),
                        at("red_f", slot, "w")
                    ));
                }
                _ => {}
            }
        }
    }

    /// Declares the value `s{j}` of each reduction `j` of `reds` from its combined accumulator `a{j}` (or
    /// index `i{j}`): the index of an arg reduction, the sum over the count for a mean, else the accumulator.
    pub(crate) fn finish(&self, c: &mut emit::Code, reds: &[usize]) {
        for &j in reds {
            match self.role[j] {
                Role::Reduction(op) if op.is_arg() => {
                    c.line(format!("const long long s{j} = i{j};"));
                }
                Role::Reduction(Reduce::Mean) => {
                    c.line(format!("const float s{j} = a{j} / (float)ncols;"));
                }
                Role::Reduction(_) => c.line(format!("const float s{j} = a{j};")),
                _ => {}
            }
        }
    }

    /// The passes of `p` (lowered), reducing `reduced`.
    pub(crate) fn new(p: &Program, reduced: &[usize]) -> Self {
        let is_c = |d: &usize| reduced.contains(d);
        let role: Vec<Role> = p
            .stmts
            .iter()
            .map(|s| {
                if s.axes.iter().any(is_c) {
                    Role::Element
                } else if let Expr::Reduce(op, ..) = &s.expr {
                    Role::Reduction(*op)
                } else {
                    Role::Scalar
                }
            })
            .collect();
        let element_input = |k: usize| p.inputs[k].axes.iter().any(is_c);
        let need_of = |roots: &[&Expr]| -> Need {
            let mut elems = Vec::new();
            let mut inputs = Vec::new();
            let mut scalars = Vec::new();
            let mut todo: Vec<&Expr> = roots.to_vec();
            while let Some(e) = todo.pop() {
                let (mut ins, mut vals) = (Vec::new(), Vec::new());
                emit::refs(e, &mut ins, &mut vals);
                for k in ins {
                    if element_input(k) && !inputs.contains(&k) {
                        inputs.push(k);
                    }
                }
                for j in vals {
                    if role[j] == Role::Element {
                        if !elems.contains(&j) {
                            elems.push(j);
                            todo.push(&p.stmts[j].expr);
                        }
                    } else if !scalars.contains(&j) {
                        scalars.push(j);
                    }
                }
            }
            elems.sort_unstable();
            inputs.sort_unstable();
            scalars.sort_unstable();
            Need {
                elems,
                element_inputs: inputs,
                scalars,
            }
        };

        // ready[j]: the number of reduction passes that must have run before scalar j has its value.
        let mut ready = vec![0usize; p.stmts.len()];
        let mut reductions: Vec<Vec<usize>> = Vec::new();
        let mut need: Vec<Need> = Vec::new();
        for (j, s) in p.stmts.iter().enumerate() {
            match role[j] {
                Role::Element => {}
                Role::Scalar => {
                    let n = need_of(&[&s.expr]);
                    ready[j] = n.scalars.iter().map(|&i| ready[i]).max().unwrap_or(0);
                }
                Role::Reduction(_) => {
                    let Expr::Reduce(_, _, body) = &s.expr else {
                        continue;
                    };
                    let n = need_of(&[body]);
                    let pass = n.scalars.iter().map(|&i| ready[i]).max().unwrap_or(0);
                    if pass == reductions.len() {
                        reductions.push(Vec::new());
                        need.push(Need::default());
                    }
                    reductions[pass].push(j);
                    let merged = &mut need[pass];
                    for e in n.elems {
                        if !merged.elems.contains(&e) {
                            merged.elems.push(e);
                        }
                    }
                    for k in n.element_inputs {
                        if !merged.element_inputs.contains(&k) {
                            merged.element_inputs.push(k);
                        }
                    }
                    for i in n.scalars {
                        if !merged.scalars.contains(&i) {
                            merged.scalars.push(i);
                        }
                    }
                    merged.elems.sort_unstable();
                    merged.element_inputs.sort_unstable();
                    merged.scalars.sort_unstable();
                    ready[j] = pass + 1;
                }
            }
        }
        let mut stages = vec![Vec::new(); reductions.len() + 1];
        for (j, r) in role.iter().enumerate() {
            if *r == Role::Scalar {
                stages[ready[j]].push(j);
            }
        }
        let element_outputs: Vec<usize> = p
            .outputs()
            .filter(|(j, _)| role[*j] == Role::Element)
            .map(|(j, _)| j)
            .collect();
        let scalar_outputs: Vec<usize> = p
            .outputs()
            .filter(|(j, _)| role[*j] != Role::Element)
            .map(|(j, _)| j)
            .collect();
        if !element_outputs.is_empty() {
            let roots: Vec<&Expr> = element_outputs.iter().map(|&j| &p.stmts[j].expr).collect();
            let mut n = need_of(&roots);
            n.elems.extend(&element_outputs);
            n.elems.sort_unstable();
            n.elems.dedup();
            need.push(n);
        }
        // Integer inputs are gathers' indices, which each gather reads itself.
        let item_inputs: Vec<usize> = (0..p.inputs.len())
            .filter(|&k| !element_input(k) && p.inputs[k].elem == Elem::Float)
            .collect();
        let cached: Vec<usize> = (0..p.inputs.len())
            .filter(|&k| {
                element_input(k)
                    && p.inputs[k].axes.iter().any(|d| !is_c(d))
                    && need
                        .iter()
                        .filter(|n| n.element_inputs.contains(&k))
                        .count()
                        >= 2
            })
            .collect();
        Passes {
            role,
            reductions,
            stages,
            need,
            element_outputs,
            scalar_outputs,
            item_inputs,
            cached,
            moments: Vec::new(),
            online: Vec::new(),
        }
    }

    /// Moves each spread `q = Σ (b − m)²` (a sum or a mean) into the pass of the mean `m = mean b` it measures
    /// from, as a pair in [`moments`](Self::moments), when nothing else holds it back: the generator then
    /// keeps count, mean and squared distance per thread and merges them pairwise (Chan, Golub and LeVeque),
    /// which is as stable as the two passes and reads the data once instead of twice. A pass left without
    /// reductions is removed.
    pub(crate) fn fuse_moments(&mut self, p: &Program) {
        for q in 0..p.stmts.len() {
            let (Role::Reduction(Reduce::Sum | Reduce::Mean), Expr::Reduce(_, q_dims, q_body)) =
                (self.role[q], &p.stmts[q].expr)
            else {
                continue;
            };
            let Some((m, body)) = squared_distance(q_body) else {
                continue;
            };
            let (Role::Reduction(Reduce::Mean), Expr::Reduce(_, m_dims, m_body)) =
                (self.role[m], &p.stmts[m].expr)
            else {
                continue;
            };
            if m_dims != q_dims || **m_body != *body {
                continue;
            }
            let Some((pm, pq)) = self.joinable(m, q, body) else {
                continue;
            };
            self.moments.push((m, q));
            self.join(pm, pq, q, true);
        }
    }

    /// Moves each sum (or mean) `s = Σ exp(b − m)` into the pass of the max `m = max b` it is shifted by, as a
    /// pair in [`online`](Self::online), when nothing else holds it back: the generator then keeps a running
    /// max and a sum rescaled whenever the max grows (Milakov and Gimelshein's online softmax), merged pairwise,
    /// and reads the data once instead of twice. A pass left without reductions is removed.
    pub(crate) fn fuse_online(&mut self, p: &Program) {
        for s in 0..p.stmts.len() {
            let (Role::Reduction(Reduce::Sum | Reduce::Mean), Expr::Reduce(_, s_dims, s_body)) =
                (self.role[s], &p.stmts[s].expr)
            else {
                continue;
            };
            let Some((m, body)) = shifted_exp(p, &self.role, s_body) else {
                continue;
            };
            let (Role::Reduction(Reduce::Max), Expr::Reduce(_, m_dims, m_body)) =
                (self.role[m], &p.stmts[m].expr)
            else {
                continue;
            };
            if m_dims != s_dims || element_root(p, &self.role, m_body) != body {
                continue;
            }
            let Some((pm, ps)) = self.joinable(m, s, body) else {
                continue;
            };
            self.online.push((m, s));
            // The max's pass already evaluates the body (its own); the sum's elements, which read the max,
            // belong to no pass before the max is known.
            self.join(pm, ps, s, false);
        }
    }

    /// `(pm, pq)`, the passes of reductions `m` and `q`, where `q` (whose body reads `m` beside `body`) can
    /// join `m`'s pass: `q`'s pass follows `m`'s and waits for nothing else, everything else `body` reads being
    /// ready before `m`'s pass.
    fn joinable(&self, m: usize, q: usize, body: &Expr) -> Option<(usize, usize)> {
        let pass_of = |j: usize| self.reductions.iter().position(|r| r.contains(&j));
        let (pm, pq) = (pass_of(m)?, pass_of(q)?);
        let mut ins = Vec::new();
        let mut vals = Vec::new();
        emit::refs(body, &mut ins, &mut vals);
        let ready_before = |j: usize| {
            self.role[j] == Role::Element
                || self.stages[..=pm].iter().any(|st| st.contains(&j))
                || self.reductions[..pm].iter().any(|r| r.contains(&j))
        };
        (pq == pm + 1 && vals.iter().all(|&j| ready_before(j))).then_some((pm, pq))
    }

    /// Moves reduction `q` from pass `pq` (`pm + 1`) into pass `pm`, removing `pq` if that leaves it empty
    /// (merging its needs into `pm`'s where `merge_needs`), and keeps on chip only the inputs that two passes
    /// still read.
    fn join(&mut self, pm: usize, pq: usize, q: usize, merge_needs: bool) {
        self.reductions[pq].retain(|&j| j != q);
        self.reductions[pm].push(q);
        if self.reductions[pq].is_empty() {
            self.reductions.remove(pq);
            // The scalars computed after the emptied pass now follow the joined pass, in statement order.
            let after = self.stages.remove(pq + 1);
            self.stages[pq].extend(after);
            self.stages[pq].sort_unstable();
            let removed = self.need.remove(pq);
            if merge_needs {
                let merged = &mut self.need[pm];
                for (to, from) in [
                    (&mut merged.elems, removed.elems),
                    (&mut merged.element_inputs, removed.element_inputs),
                    (&mut merged.scalars, removed.scalars),
                ] {
                    to.extend(from);
                    to.sort_unstable();
                    to.dedup();
                }
            }
        }
        let need = &self.need;
        self.cached
            .retain(|k| need.iter().filter(|n| n.element_inputs.contains(k)).count() >= 2);
    }

    /// The reductions of pass `pass` (none for the final, writing pass).
    pub(crate) fn reductions_of(&self, pass: usize) -> &[usize] {
        self.reductions.get(pass).map_or(&[], Vec::as_slice)
    }

    /// One element's values in pass `pass`, where the element's inputs are in `env`: its element statements
    /// `v{j}`, then in the final pass each element output stored to `out(j)`, else each reduction of `reds`
    /// accumulated (`at`: the element's linear position, which arg reductions record).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lane(
        &self,
        c: &mut emit::Code,
        p: &Program,
        pass: usize,
        reds: &[usize],
        env: &dyn emit::Env,
        out: &dyn Fn(usize) -> String,
        at: &str,
    ) {
        for &j in &self.need[pass].elems {
            c.line(format!(
                "const float v{j} = {};",
                emit::expr(&p.stmts[j].expr, env)
            ));
        }
        if self.is_final(pass) {
            for &j in &self.element_outputs {
                c.line(format!("{} = v{j};", out(j)));
            }
            return;
        }
        for &j in reds {
            let (Role::Reduction(op), Expr::Reduce(_, _, body)) = (self.role[j], &p.stmts[j].expr)
            else {
                continue;
            };
            match self.online_of(j) {
                // The pair takes the max's body a chunk at a time ([`Passes::online_in`]); the sum's own body
                // is that body's shifted exponential.
                Some((m, _)) if m == j => c.line(format!("ob{m}[l] = {};", emit::expr(body, env))),
                Some(_) => {}
                None => c.line(accumulate_at(op, j, &emit::expr(body, env), at)),
            }
        }
    }

    /// The online pairs `(m, s)` of pass `pass`: a generator declares each chunk's values `ob{m}[IO::V]`
    /// (`-inf` where the chunk ends early), lets [`lane`](Self::lane) fill them, then folds the chunk into
    /// `a{m}`, `a{s}` with `optiml_p::online_chunk`.
    pub(crate) fn online_in(&self, pass: usize) -> Vec<(usize, usize)> {
        let reds = self.reductions_of(pass);
        self.online
            .iter()
            .copied()
            .filter(|(m, _)| reds.contains(m))
            .collect()
    }

    /// The online pair whose max or sum `j` is.
    pub(crate) fn online_of(&self, j: usize) -> Option<(usize, usize)> {
        self.online.iter().copied().find(|&(m, s)| m == j || s == j)
    }

    /// The moment pair whose mean or spread `j` is.
    pub(crate) fn moment_of(&self, j: usize) -> Option<(usize, usize)> {
        self.moments
            .iter()
            .copied()
            .find(|&(m, q)| m == j || q == j)
    }

    /// The most inputs one pass reads per element (at least 1): what a step of loads in flight costs in
    /// registers.
    pub(crate) fn max_element_inputs(&self) -> u32 {
        self.need
            .iter()
            .map(|n| n.element_inputs.len() as u32)
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// The number of passes over the data (reductions, then the final one if any).
    pub(crate) fn count(&self) -> usize {
        self.need.len()
    }

    /// Whether pass `pass` is the final (writing) one.
    pub(crate) fn is_final(&self, pass: usize) -> bool {
        pass == self.reductions.len()
    }

    /// The first pass reading input `k`.
    pub(crate) fn first_use(&self, k: usize) -> Option<usize> {
        self.need.iter().position(|n| n.element_inputs.contains(&k))
    }

    /// The most reductions of one kind (plain, arg) in one pass: the shared-memory slots a combine needs.
    pub(crate) fn slots(&self) -> (usize, usize) {
        let mut plain = 0;
        let mut arg = 0;
        for pass in &self.reductions {
            let a = pass
                .iter()
                .filter(|&&j| matches!(self.role[j], Role::Reduction(op) if op.is_arg()))
                .count();
            plain = plain.max(pass.len());
            arg = arg.max(a);
        }
        (plain, arg)
    }
}

/// `(m, b)` where `e` is `(b − m)²` (as a square or a product of two equal differences) and `m` a statement.
fn squared_distance(e: &Expr) -> Option<(usize, &Expr)> {
    fn diff(d: &Expr) -> Option<(usize, &Expr)> {
        match d {
            Expr::Binary(Binary::Sub, b, m) => match **m {
                Expr::Value(m) => Some((m, &**b)),
                _ => None,
            },
            _ => None,
        }
    }
    match e {
        Expr::Binary(Binary::Pow, d, two) if matches!(**two, Expr::Const(c) if c == 2.0) => diff(d),
        Expr::Binary(Binary::Mul, a, b) if a == b => diff(a),
        _ => None,
    }
}

/// The expression an element statement's value stands for, following `Value`s of element statements.
fn element_root<'a>(p: &'a Program, role: &[Role], mut e: &'a Expr) -> &'a Expr {
    while let Expr::Value(j) = e {
        if role[*j] != Role::Element {
            break;
        }
        e = &p.stmts[*j].expr;
    }
    e
}

/// `(m, b)` where `e` is `exp(b − m)` (through element statements) and `m` a statement.
fn shifted_exp<'a>(p: &'a Program, role: &[Role], e: &'a Expr) -> Option<(usize, &'a Expr)> {
    let Expr::Unary(Unary::Exp, a) = element_root(p, role, e) else {
        return None;
    };
    let Expr::Binary(Binary::Sub, b, m) = element_root(p, role, a) else {
        return None;
    };
    match **m {
        Expr::Value(m) if role[m] != Role::Element => Some((m, element_root(p, role, b))),
        _ => None,
    }
}

/// The values at an element of a reduction program, as every reduction generator names them: per-item inputs
/// `si{k}`, element statements `v{j}`, scalars `s{j}` ([`scalar_ref`]); element inputs as the generator's
/// `element` names them (an unpacked chunk's `x{k}[l]`, a column's `x{k}`, a per-tile value).
pub(crate) struct ElementEnv<'a> {
    /// The lowered program.
    pub p: &'a Program,
    /// Its passes.
    pub passes: &'a Passes,
    /// An element input's value at the current element.
    pub element: &'a dyn Fn(usize) -> String,
}

impl emit::Env for ElementEnv<'_> {
    fn input(&self, k: usize) -> String {
        if self.passes.item_inputs.contains(&k) {
            format!("si{k}")
        } else {
            (self.element)(k)
        }
    }
    fn value(&self, j: usize) -> String {
        if self.passes.role[j] == Role::Element {
            format!("v{j}")
        } else {
            scalar_ref(self.p, j)
        }
    }
    fn fast(&self) -> bool {
        self.p.dtype != optiml_spec::DType::F32
    }
    fn invariant(&self, e: &Expr) -> bool {
        let passes = self.passes;
        emit::leaves_all(e, &|leaf| match leaf {
            Expr::Input(k) => passes.item_inputs.contains(k),
            Expr::Value(j) => passes.role[*j] != Role::Element,
            // Loaded once per row.
            Expr::Gather(..) => true,
            _ => false,
        })
    }
    fn gather(&self, e: &Expr) -> String {
        emit::gathered(e).unwrap_or_else(|| "OPTIML_GATHER_UNSUPPORTED".into())
    }
}

/// Per-item values, computed once: divisions stay divisions, exp and log stay accurate.
pub(crate) struct ScalarEnv<'a>(pub ElementEnv<'a>);

impl emit::Env for ScalarEnv<'_> {
    fn input(&self, k: usize) -> String {
        self.0.input(k)
    }
    fn value(&self, j: usize) -> String {
        self.0.value(j)
    }
    fn gather(&self, e: &Expr) -> String {
        self.0.gather(e)
    }
}

/// One element's contribution `b` at linear position `at` to reduction `j` (accumulator `a{j}`, index `i{j}`).
pub(crate) fn accumulate_at(op: Reduce, j: usize, b: &str, at: &str) -> String {
    match op {
        Reduce::Sum | Reduce::Mean => format!("a{j} = a{j} + {b};"),
        Reduce::Prod => format!("a{j} = a{j} * {b};"),
        Reduce::Max => format!("a{j} = optiml_p::maxf(a{j}, {b});"),
        Reduce::Min => format!("a{j} = optiml_p::minf(a{j}, {b});"),
        // A thread meets its elements in increasing index order: a strict comparison keeps the first extreme.
        Reduce::Argmax | Reduce::Argmin => format!(
            "{{ const float t_ = {b}; if (optiml_p::arg_step<{}>(t_, a{j}, i{j})) {{ a{j} = t_; i{j} = {at}; }} }}",
            op == Reduce::Argmax
        ),
    }
}

/// How a statement's value reads in an expression: integer (arg) scalars convert to f32.
pub(crate) fn scalar_ref(p: &Program, j: usize) -> String {
    if p.stmts[j].elem == Elem::Float {
        format!("s{j}")
    } else {
        format!("((float)s{j})")
    }
}

/// The store of scalar statement `j` into an output of its element type.
pub(crate) fn scalar_store(p: &Program, j: usize) -> String {
    match p.stmts[j].elem {
        Elem::Float => format!("IO::put(s{j})"),
        Elem::I64 => format!("(long long)s{j}"),
        Elem::I32 => format!("(int)s{j}"),
        // Statements are floats or positions (`classify::check`); a mask is only ever an input.
        Elem::Bool => format!("(unsigned char)(s{j} != 0.f)"),
    }
}
