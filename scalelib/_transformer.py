"""Transformer math (chapter 4): parameters, FLOPs, KV cache and training memory of a :class:`ModelSpec`.

Every matmul ``[tokens, a] x [a, b]`` does 2·tokens·a·b FLOPs forward and twice that backward
(one product for the weights' gradient, one for the input's), so training costs 3x the forward
pass: 6 FLOPs per parameter per token for every weight matrix. Per layer, with the book's letters:

==========================  ==========================  ===============================
component                   parameters                  training FLOPs
==========================  ==========================  ===============================
``mlp`` (gated)             3·D·F                       18·B·T·D·F
``attention`` (Q, K, V, O)  2·D·(N + K)·H               12·B·T·D·(N + K)·H
``dot_product`` (QKᵀ, AV)   none                        12·B·T²·N·H (half with a causal kernel)
``embeddings``              V·D, twice if untied        6·B·T·D·V (the unembedding; once, not per layer)
``norms``                   2·D                         left out (a few FLOPs per value)
==========================  ==========================  ===============================

A mixture of experts counts E routed experts (plus shared ones) and a router of D·E parameters,
but a token's FLOPs use only its k experts; multi-head latent attention (DeepSeek) has its own
projections and a compressed KV cache. Every function takes a model name or a ModelSpec; token
counts and sequence lengths may be numpy arrays (a sweep is one call), and ``explain`` shows the
derivation. Facts and formulas follow ch. 4 of How to Scale Your Model (Austin et al., 2025).
"""

from __future__ import annotations

import numpy as np

from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError, unknown
from ._models import ModelSpec, model as _model
from ._specs import bytes_per_value, dtype_name
from ._units import fmt  # noqa: F401  (the examples use it)
from ._validate import broadcast, flag, number, positive, shown

#: Components whose parameters :func:`params` counts.
PARAM_COMPONENTS = ("mlp", "attention", "embeddings", "norms")
#: Components whose FLOPs :func:`forward_flops` and :func:`train_flops` count.
FLOP_COMPONENTS = ("mlp", "attention", "dot_product", "embeddings")
#: Rematerialisation policies: what the backward pass recomputes of the forward.
REMAT = ("none", "dot_product", "full", "selective")
#: Optimizer -> values of state kept per parameter (Adam: first and second moments).
OPTIMIZER_STATES = {"adam": 2, "momentum": 1, "sgd": 0}


def _component(component, known, what: str) -> str:
    if isinstance(component, str) and component in (*known, "total"):
        return component
    why = {"dot_product": " (dot-product attention has no parameters: it multiplies activations by activations)",
           "norms": " (norms do no matmuls; their few FLOPs per value are left out, as in the book)"}
    extra = why.get(component, "") if isinstance(component, str) else ""
    raise InvalidValueError(f"`component` must be 'total' or one of {', '.join(known)} for {what}, "
                            f"got {shown(component)}{extra}")


def _mats(m: ModelSpec) -> int:
    return 3 if m.gated else 2


# --- parameters, component by component -------------------------------------------------------


def _attention_params(m: ModelSpec) -> Derivation:
    """Parameters of the attention projections over all layers (MLA: its own matrices)."""
    L, D, N, K, H = m.L, m.D, m.N, m.K, m.H
    if m.mla is None:
        value = L * 2 * D * (N + K) * H
        return Derivation("P_attention", "L·2·D·(N+K)·H", f"{L}·2·{D}·({N}+{K})·{H}", float(value), "params")
    a = m.mla
    qk = a.qk_nope_head_dim + a.qk_rope_head_dim
    if a.q_lora_rank is None:
        query, query_text, query_formula = D * N * qk, f"{D}·{N}·{qk}", "D·N·d_qk"
    else:
        r = a.q_lora_rank
        query, query_text, query_formula = D * r + r * N * qk, f"{D}·{r} + {r}·{N}·{qk}", "D·r_q + r_q·N·d_qk"
    per_layer = (query + D * (a.kv_lora_rank + a.qk_rope_head_dim)
                 + a.kv_lora_rank * N * (a.qk_nope_head_dim + a.v_head_dim) + N * a.v_head_dim * D)
    return Derivation(
        "P_attention", f"L·({query_formula} + D·(r_kv + d_rope) + r_kv·N·(d_nope + d_v) + N·d_v·D)",
        f"{L}·({query_text} + {D}·({a.kv_lora_rank} + {a.qk_rope_head_dim}) + {a.kv_lora_rank}·{N}·"
        f"({a.qk_nope_head_dim} + {a.v_head_dim}) + {N}·{a.v_head_dim}·{D})",
        float(L * per_layer), "params",
        where=("r_q, r_kv: the sizes of MLA's query and key/value latents; d_qk, d_nope, d_rope: a head's query/key "
               "size and its two parts (d_qk = d_nope + d_rope), the second carrying the positions; d_v: a head's "
               "value size",))


def _mlp_params(m: ModelSpec, active: bool) -> Derivation:
    """Parameters of the MLPs over all layers: every expert's, or (active) those one token uses."""
    c, D, F = _mats(m), m.D, m.F
    if not m.is_moe:
        return Derivation("P_mlp", f"L·{c}·D·F", f"{m.L}·{c}·{D}·{F}", float(m.L * c * D * F), "params")
    used, letter = (m.k, "k") if active else (m.E, "E")
    s, E = m.shared_experts, m.E
    experts, experts_text = (f"({letter} + s)", f"({used} + {s})") if s else (letter, f"{used}")
    formula = f"L_moe·({experts}·{c}·D·F + D·E)"
    text = f"{m.moe_layers}·({experts_text}·{c}·{D}·{F} + {D}·{E})"
    value = m.moe_layers * ((used + s) * c * D * F + D * E)
    where = [f"L_moe: the {m.moe_layers} layers with experts; "
             + ("E: routed experts per layer; k: the experts a token uses" if active else "E: routed experts per layer")
             + ("; s: shared experts, used by every token" if s else "") + "; D·E: the router's weights"]
    if m.dense_layers:
        formula += f" + L_dense·{c}·D·F_dense"
        text += f" + {m.dense_layers}·{c}·{D}·{m.dense_F}"
        value += m.dense_layers * c * D * m.dense_F
        where.append(f"L_dense, F_dense: the {m.dense_layers} leading layers with a dense MLP, and its width")
    return Derivation("P_mlp" + (" (active)" if active else ""), formula, text, float(value), "params",
                      where=tuple(where))


def _embedding_params(m: ModelSpec) -> Derivation:
    if m.tied_embeddings:
        return Derivation("P_embeddings", "V·D", f"{m.V}·{m.D}", float(m.V * m.D), "params",
                          where=("one V x D table, shared by the input embedding and the output layer",))
    return Derivation("P_embeddings", "2·V·D", f"2·{m.V}·{m.D}", float(2 * m.V * m.D), "params",
                      where=("the input embedding and the unembedding (output layer), each V x D",))


def _norm_params(m: ModelSpec) -> Derivation:
    n, L, D = m.norms_per_layer, m.L, m.D
    if m.mla is None:
        return Derivation("P_norms", f"({n}·L + 1)·D", f"({n}·{L} + 1)·{D}", float((n * L + 1) * D), "params")
    latents = (m.mla.q_lora_rank or 0) + m.mla.kv_lora_rank
    return Derivation("P_norms", f"({n}·L + 1)·D + L·(r_q + r_kv)", f"({n}·{L} + 1)·{D} + {L}·{latents}",
                      float((n * L + 1) * D + L * latents), "params",
                      where=("r_q, r_kv: the sizes of MLA's query and key/value latents, normalised too",))


_PARAMS = {"attention": lambda m, active: _attention_params(m), "mlp": _mlp_params,
           "embeddings": lambda m, active: _embedding_params(m), "norms": lambda m, active: _norm_params(m)}


@derivable
def params(model, *, component="total", active=False):
    """Parameters of a Transformer, in all or in one component; for an MoE, all experts' or one token's.

    Formula:
        params = L·(2·D·(N+K)·H + 3·D·F + 2·D) + D + 2·V·D   (gated MLP, untied embeddings, 2 norms per layer)

    Args:
        model: a model name (``"llama-3-70b"``) or a :class:`ModelSpec`.
        component: ``"total"`` (default), ``"mlp"`` (experts and router included), ``"attention"``
            (the Q, K, V, O projections, or MLA's), ``"embeddings"`` (input and output tables) or ``"norms"``.
        active: count only the parameters one token uses (its k experts and the shared ones), for an MoE.

    Returns:
        parameters (a count).

    Chapter:
        4 (Transformer math)

    Example:
        >>> round(params("llama-3-8b") / 1e9, 2)
        8.03
        >>> round(params("mixtral-8x7b", active=True) / 1e9, 1)
        12.9
    """
    m = _model(model)
    component = _component(component, PARAM_COMPONENTS, "parameters")
    active = flag("active", active)
    suffix = " (active)" if active and m.is_moe else ""
    if component != "total":
        d = _PARAMS[component](m, active)
        return Derivation(f"params({m.name}, {component}){suffix}", d.formula, d.substituted, d.value, "params",
                          where=d.where)
    parts = [_PARAMS[c](m, active) for c in ("attention", "mlp", "embeddings", "norms")]
    return Derivation(f"params({m.name}){suffix}", " + ".join(p.symbol for p in parts),
                      " + ".join(q(p.value) for p in parts), float(sum(p.value for p in parts)), "params",
                      tuple(parts))


@derivable
def param_bytes(model, *, dtype="bf16", active=False):
    """Bytes of a model's parameters in `dtype` (all of them, or one token's for an MoE).

    Formula:
        nbytes = params · bytes per value

    Args:
        model: a model name or a :class:`ModelSpec`.
        dtype: the dtype the weights are stored in (``"bf16"``, ``"int8"``, ``"int4"``, ...).
        active: only the parameters one token uses (an MoE's k experts).

    Returns:
        bytes (B).

    Chapter:
        4 (Transformer math)

    Example:
        >>> fmt(param_bytes("llama-3-70b", dtype="int8"), "B")
        '70.6 GB'
    """
    count = explain(params, model, active=active)
    name = dtype_name(dtype)
    b = bytes_per_value(name)
    return Derivation(f"param bytes ({name})", "params · bytes per value", f"{q(count.value)} · {q(b)}",
                      count.value * b, "B", (count,))


@derivable
def training_state_bytes(model, *, param_dtype="bf16", grad_dtype="bf16", optimizer="adam", optimizer_dtype="f32"):
    """Bytes of the training state: parameters, their gradients and the optimizer's state.

    The book's rule of thumb, bf16 parameters and Adam's two moments in f32, is 2 + 8 = 10 bytes per
    parameter, leaving the gradients out (``grad_dtype=None``); with bf16 gradients it is 12.
    Activations (and their checkpoints) are not included: they depend on the batch.

    Formula:
        nbytes = params · (p + g + s · o)

    Args:
        model: a model name or a :class:`ModelSpec`.
        param_dtype: dtype of the parameters (p bytes each).
        grad_dtype: dtype of the gradients (g bytes each), or None to leave them out.
        optimizer: ``"adam"`` (s = 2 values per parameter), ``"momentum"`` (1) or ``"sgd"`` (0).
        optimizer_dtype: dtype of the optimizer's state (o bytes each).

    Returns:
        bytes (B).

    Chapter:
        4 (Transformer math), 5 (Parallelism for training)

    Example:
        >>> fmt(training_state_bytes("llama-3-70b", grad_dtype=None), "B")
        '706 GB'
    """
    count = explain(params, model)
    p = bytes_per_value(dtype_name(param_dtype, arg="param_dtype"))
    g = 0.0 if grad_dtype is None else bytes_per_value(dtype_name(grad_dtype, arg="grad_dtype"))
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZER_STATES:
        raise unknown("optimizer", optimizer if isinstance(optimizer, str) else shown(optimizer), OPTIMIZER_STATES,
                      arg="optimizer")
    s = OPTIMIZER_STATES[optimizer]
    o = bytes_per_value(dtype_name(optimizer_dtype, arg="optimizer_dtype"))
    return Derivation("training state", "params · (p + g + s·o)", f"{q(count.value)} · ({q(p)} + {q(g)} + {s}·{q(o)})",
                      count.value * (p + g + s * o), "B", (count,),
                      where=(f"p, g, o: bytes per parameter, gradient and optimizer value; s: the {optimizer} "
                             f"optimizer's values per parameter",))


# --- FLOPs ------------------------------------------------------------------------------------


def _head_sizes(m: ModelSpec) -> tuple[int, int]:
    """(query/key size, value size) of one head."""
    if m.mla is None:
        return m.H, m.H
    return m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim, m.mla.v_head_dim


def _tokens(tokens, seq_len):
    n, T = positive("tokens", tokens), number("seq_len", seq_len, positive=True, at_least=1)
    n, T = broadcast(tokens=n, seq_len=T)
    return n, T


def _forward_parts(m: ModelSpec, n, T, causal: bool) -> dict[str, Derivation]:
    """Forward FLOPs of each component for n tokens, each attending to T positions."""
    mlp, attention = _mlp_params(m, True), _attention_params(m)
    parts = {
        "mlp": Derivation("F_mlp", "2·tokens·P_mlp", lambda: f"2·{q(n)}·{q(mlp.value)}",
                          plain(2 * n * mlp.value), "FLOP", (mlp,)),
        "attention": Derivation("F_attention", "2·tokens·P_attention", lambda: f"2·{q(n)}·{q(attention.value)}",
                                plain(2 * n * attention.value), "FLOP", (attention,)),
    }
    hq, hv = _head_sizes(m)
    half = 0.5 if causal else 1.0
    heads = "(d_qk + d_v)" if m.mla is not None else "2·H"
    heads_text = f"({hq} + {hv})" if m.mla is not None else f"2·{m.H}"
    formula = f"2·tokens·T·L·N·{heads}" + (" / 2" if causal else "")
    parts["dot_product"] = Derivation(
        "F_dot_product", formula, lambda: f"2·{q(n)}·{q(T)}·{m.L}·{m.N}·{heads_text}" + (" / 2" if causal else ""),
        plain(2 * n * T * m.L * m.N * (hq + hv) * half), "FLOP",
        where=("T: the positions each token attends to (the sequence length)"
               + ("; d_qk, d_v: a head's query/key and value sizes" if m.mla is not None else "")
               + "; QKᵀ and its product with V, in every head" + (", a causal kernel skipping the masked half"
                                                                  if causal else ""),))
    parts["embeddings"] = Derivation("F_embeddings", "2·tokens·D·V", lambda: f"2·{q(n)}·{m.D}·{m.V}",
                                     plain(2 * n * m.D * m.V), "FLOP",
                                     where=("the unembedding matmul; the input embedding is a lookup (no FLOPs)",))
    return parts


def _flop_args(model, component, causal):
    m = _model(model)
    return m, _component(component, FLOP_COMPONENTS, "FLOPs"), flag("causal", causal)


@derivable
def forward_flops(model, *, seq_len, tokens=1, component="total", causal=False):
    """FLOPs of a forward pass over `tokens` tokens of sequences of `seq_len`, in all or one component.

    Counts the matmuls, as the book does: 2 FLOPs per weight per token, plus dot-product attention
    (each token against the T positions of its sequence). Norms, softmax and activations, a few
    FLOPs per value, are left out. With ``tokens=1`` it is the FLOPs per token; a batch of B
    sequences is ``tokens=B*seq_len``.

    Formula:
        FLOPs = 2·tokens·(P_mlp + P_attention + D·V) + 4·tokens·T·L·N·H   (P_mlp: the active experts')

    Args:
        model: a model name or a :class:`ModelSpec`.
        seq_len: T, the sequence length (tokens, >= 1; an array for a sweep).
        tokens: tokens processed (> 0; 1 gives the FLOPs per token).
        component: ``"total"``, ``"mlp"``, ``"attention"`` (projections), ``"dot_product"`` or ``"embeddings"``
            (the unembedding).
        causal: count only the unmasked half of dot-product attention, as a causal attention kernel does;
            a plain masked einsum computes all of it (False, the default).

    Returns:
        FLOP.

    Chapter:
        4 (Transformer math)

    Example:
        >>> fmt(forward_flops("llama-3-70b", seq_len=8192), "FLOP")
        '1.6e11 FLOP'
    """
    m, component, causal = _flop_args(model, component, causal)
    n, T = _tokens(tokens, seq_len)
    parts = _forward_parts(m, n, T, causal)
    if component != "total":
        d = parts[component]
        return Derivation(f"FLOPs_fwd({m.name}, {component})", d.formula, d.substituted, d.value, "FLOP", d.steps,
                          d.where)
    values = [p.value for p in parts.values()]
    return Derivation(f"FLOPs_fwd({m.name})", " + ".join(p.symbol for p in parts.values()),
                      lambda: " + ".join(q(v, "FLOP") for v in values), plain(sum(values)), "FLOP",
                      tuple(parts.values()))


def _remat(remat) -> str:
    if not isinstance(remat, str) or remat not in REMAT:
        raise unknown("remat policy", remat if isinstance(remat, str) else shown(remat), REMAT, arg="remat")
    return remat


@derivable
def train_flops(model, *, seq_len, tokens=1, component="total", causal=False, remat="none"):
    """FLOPs of a training step (forward and backward) over `tokens` tokens of sequences of `seq_len`.

    The backward pass does two matmuls for each of the forward's (the gradients of the weights and of
    the input), so training costs 3x the forward: about 6·params·tokens when attention is short.
    Rematerialisation adds what the backward pass recomputes: ``"full"`` (block remat, only each
    layer's input saved) recomputes every layer's forward, about 8·params·tokens; ``"dot_product"``
    (every weight matmul's output saved) and ``"selective"`` (Korthikanti et al. 2022: all but the
    attention core saved) recompute only QKᵀ and its product with V.

    Formula:
        FLOPs = 3·FLOPs_fwd + FLOPs recomputed

    Args:
        model: a model name or a :class:`ModelSpec`.
        seq_len: T, the sequence length (tokens, >= 1; an array for a sweep).
        tokens: tokens processed (> 0; 1 gives the FLOPs per token).
        component: ``"total"``, ``"mlp"``, ``"attention"``, ``"dot_product"`` or ``"embeddings"``.
        causal: count only the unmasked half of dot-product attention (a causal kernel).
        remat: ``"none"`` (default), ``"dot_product"``, ``"selective"`` or ``"full"`` (the unembedding is never
            recomputed).

    Returns:
        FLOP.

    Chapter:
        4 (Transformer math)

    Example:
        >>> fmt(train_flops("llama-3-70b", seq_len=4096, tokens=4096 * 1024), "FLOP")
        '1.88e18 FLOP'
        >>> round(train_flops("llama-3-8b", seq_len=2048, remat="full") / params("llama-3-8b"), 1)
        7.9
    """
    m, component, causal = _flop_args(model, component, causal)
    remat = _remat(remat)
    n, T = _tokens(tokens, seq_len)
    parts = _forward_parts(m, n, T, causal)
    again = {"none": (), "dot_product": ("dot_product",), "selective": ("dot_product",),
             "full": ("mlp", "attention", "dot_product")}[remat]
    chosen = FLOP_COMPONENTS if component == "total" else (component,)
    forward = [parts[c] for c in chosen]
    recomputed = [parts[c] for c in chosen if c in again]
    value = 3 * sum(p.value for p in forward) + sum(p.value for p in recomputed)
    where = f"; remat '{remat}' recomputes " + ", ".join(p.symbol for p in recomputed) if recomputed else ""
    inner = " + ".join(p.symbol for p in forward)
    formula = (f"3·({inner})" if len(forward) > 1 else f"3·{inner}") + (
        " + " + " + ".join(p.symbol for p in recomputed) if recomputed else "")
    fwd_values, re_values = [p.value for p in forward], [p.value for p in recomputed]

    def numbers():
        text = " + ".join(q(v, "FLOP") for v in fwd_values)
        text = f"3·({text})" if len(fwd_values) > 1 else f"3·{text}"
        return text + ("".join(f" + {q(v, 'FLOP')}" for v in re_values))

    symbol = f"FLOPs_train({m.name}" + (f", {component}" if component != "total" else "") + ")"
    return Derivation(symbol, formula, numbers, plain(value), "FLOP", tuple(forward),
                      where=(f"forward once, backward twice as much{where}",))


@derivable(allow_inf=True)
def attention_crossover_seq_len(model, *, causal=False):
    """The sequence length T at which dot-product attention does as many FLOPs as the layers' matmuls.

    Both grow with the tokens, and attention also with T, so they cross at one T: for F = 4D,
    N·H = D and K = N this is T = 8D (the book's rule), twice that with a causal kernel. The
    unembedding, which is not in any layer, is left out.

    Formula:
        T* = (P_mlp + P_attention) / (L·N·(d_qk + d_v))   (P_mlp: the active experts'; d = H for plain attention)

    Args:
        model: a model name or a :class:`ModelSpec`.
        causal: count only the unmasked half of attention (doubles T*).

    Returns:
        tokens (a sequence length).

    Chapter:
        4 (Transformer math)

    Example:
        >>> round(attention_crossover_seq_len("llama-3-70b")), 8 * 8192
        (52224, 65536)
    """
    m = _model(model)
    causal = flag("causal", causal)
    mlp, attention = _mlp_params(m, True), _attention_params(m)
    hq, hv = _head_sizes(m)
    per_position = m.L * m.N * (hq + hv) * (0.5 if causal else 1.0)
    heads = f"({hq} + {hv})" if m.mla is not None else f"2·{m.H}"
    return Derivation(f"T*({m.name})", "(P_mlp + P_attention) / (L·N·(d_qk + d_v))" + (" · 2" if causal else ""),
                      f"({q(mlp.value)} + {q(attention.value)}) / ({m.L}·{m.N}·{heads})" + (" · 2" if causal else ""),
                      (mlp.value + attention.value) / per_position, "tokens", (mlp, attention),
                      where=("d_qk, d_v: a head's query/key and value sizes (H each without MLA); per token the "
                             "layers' matmuls do 2·(P_mlp + P_attention) FLOPs forward and attention "
                             "2·T·L·N·(d_qk + d_v)" + (", halved by a causal kernel" if causal else ""),))


@derivable
def attention_intensity(T, S, *, G=1, dtype="bf16"):
    """Arithmetic intensity of dot-product attention alone: T queries against S keys and values.

    It reads Q (T·N·H values) and K and V (S·K·H each), writes the output (T·N·H), and does
    4·T·S·N·H FLOPs (QKᵀ and the product with V), per sequence; G = N / K query heads share each
    key/value head. In prefill (S = T) the intensity grows with T, as T·G/(G + 1) in bf16; in
    generation (T = 1) it stays below G, so attention is memory-bound there on any chip.

    Formula:
        I = 4·T·S·G / (b·2·(T·G + S))   (= T·S·G / (T·G + S) in bf16)

    Args:
        T: queries per sequence (tokens, > 0).
        S: keys and values per sequence (tokens, > 0).
        G: query heads per key/value head, N / K (> 0; 1 for multi-head attention).
        dtype: the dtype of Q, K, V and the output (b bytes per value).

    Returns:
        FLOP/B.

    Chapter:
        4 (Transformer math), 7 (Inference)

    Example:
        >>> attention_intensity(4096, 4096)      # prefill, multi-head attention: T / 2
        2048.0
        >>> round(attention_intensity(1, 8192, G=8), 2)   # one generated token against an 8k context
        7.99
    """
    T_, S_, G_ = positive("T", T), positive("S", S), positive("G", G)
    name = dtype_name(dtype)
    b = bytes_per_value(name)
    T_, S_, G_ = broadcast(T=T_, S=S_, G=G_)
    return Derivation("I_attention", "4·T·S·G / (b·2·(T·G + S))",
                      lambda: f"4·{q(T)}·{q(S)}·{q(G)} / ({q(b)}·2·({q(T)}·{q(G)} + {q(S)}))",
                      plain(4 * T_ * S_ * G_ / (b * 2 * (T_ * G_ + S_))), "FLOP/B",
                      where=(f"T, S: queries and keys per sequence; G: query heads per key/value head; "
                             f"b: bytes per {name} value",))


# --- KV cache and the MoE roofline ------------------------------------------------------------


@derivable
def kv_cache_bytes(model, *, tokens=1, dtype="bf16"):
    """Bytes of the KV cache for `tokens` cached tokens (1: per token; S: one sequence of length S).

    Each layer caches a key and a value vector per key/value head: 2·L·K·H values per token. MLA
    (DeepSeek) caches its compressed latent and the shared positional key instead:
    L·(r_kv + d_rope) values per token.

    Formula:
        nbytes = 2·L·K·H · tokens · bytes per value

    Args:
        model: a model name or a :class:`ModelSpec`.
        tokens: cached tokens (> 0; a sequence's length times the batch for a whole batch).
        dtype: the dtype of the cache (``"bf16"``, ``"int8"``, ...).

    Returns:
        bytes (B).

    Chapter:
        4 (Transformer math), 7 (Inference)

    Example:
        >>> fmt(kv_cache_bytes("llama-3-70b", dtype="int8"), "B", binary=True)
        '160 KiB'
    """
    m = _model(model)
    n = positive("tokens", tokens)
    name = dtype_name(dtype)
    b = bytes_per_value(name)
    if m.mla is None:
        values, formula, text = 2 * m.L * m.K * m.H, "2·L·K·H · tokens · b", f"2·{m.L}·{m.K}·{m.H}"
        where = f"b: bytes per {name} value"
    else:
        width = m.mla.kv_lora_rank + m.mla.qk_rope_head_dim
        values, formula, text = m.L * width, "L·(r_kv + d_rope) · tokens · b", f"{m.L}·{width}"
        where = f"r_kv, d_rope: the sizes of MLA's cached latent and positional key; b: bytes per {name} value"
    return Derivation(f"KV cache({m.name}, {name})", formula, lambda: f"{text} · {q(n)} · {q(b)}",
                      plain(values * np.asarray(n) * b), "B", where=(where,))


@derivable
def moe_critical_batch_size(model, chip, *, dtype="bf16", weight_dtype=None):
    """Tokens an MoE layer must process at once for its routed experts' matmuls to be compute-bound.

    A batch of B tokens multiplies each of the E experts' weights by about B·k/E tokens, so it
    needs E/k times the batch of a dense matmul (the shared experts, used by every token, reach it
    sooner). For DeepSeek-V3 with int8 weights on TPU v5e: about 120 · 256 / 8 = 3840.

    Formula:
        B_crit(MoE) = B_crit · E / k

    Args:
        model: a model name or a :class:`ModelSpec` with experts.
        chip: a chip name or a ChipSpec.
        dtype: dtype of the activations and of the arithmetic.
        weight_dtype: dtype of the weights; defaults to `dtype`.

    Returns:
        tokens.

    Chapter:
        4 (Transformer math), 7 (Inference)

    Example:
        >>> round(moe_critical_batch_size("deepseek-v3", "tpu-v5e", weight_dtype="int8"))  # the book: 120 · 32
        3844
    """
    from ._roofline import critical_batch_size

    m = _model(model)
    if not m.is_moe:
        raise InvalidValueError(f"`model`: {m.name} is dense (no experts); use critical_batch_size for its matmuls")
    dense = explain(critical_batch_size, chip, dtype=dtype, weight_dtype=weight_dtype)
    return Derivation(f"B_crit({m.name})", "B_crit · E / k", f"{q(dense.value)} · {m.E} / {m.k}",
                      dense.value * m.E / m.k, "tokens", (dense,),
                      where=("E: routed experts per layer; k: experts per token",))

