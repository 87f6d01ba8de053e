"""Hardware intrinsics: declarations and their embedding (TVM's tensorize).

An intrinsic's semantics is a te computation; per target dialect an emitter
spells it (`declare.py`). `s[C].tensorize(axis, intrin)` replaces a stage's
inner loops by calls (matched semantically in lower/tensorize.py), and
`interpret.run_lowered` executes lowered IR with every call replaced by its
declared semantics, so a wrong layout map fails on any host.

Sits on top: imports te, reference, lower layers and targets. Public names: `decl_tensor_intrin`,
`TensorIntrin`, `Emitter`, `get`, `registered`, `register`, `run_lowered`, `vta_gemm` (the VTA-like
accelerator's GEMM micro-op, for its configuration), `embed` (ranked embeddings of an intrinsic into an
operator by constraint programming, with the rewrites that realize them; needs OR-Tools)."""

from .declare import Emitter, TensorIntrin, decl_tensor_intrin
from .embed import Embedding, EmbeddingError, Rewrite, SolverMissing, SolverTimeout, embed
from .interpret import run_lowered
from .registry import get, register, registered
from .vta import vta_gemm

__all__ = ["Embedding", "EmbeddingError", "Emitter", "Rewrite", "SolverMissing", "SolverTimeout", "TensorIntrin",
           "decl_tensor_intrin", "embed", "get", "register", "registered", "run_lowered", "vta_gemm"]
