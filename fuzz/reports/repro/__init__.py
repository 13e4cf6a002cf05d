"""Standalone reproducers: a ``repro.py`` a torch-mlir or IREE maintainer can run
without dlrm-fuzz.

For one corpus entry this package writes ``repro.py`` (plus the data it loads)
into the entry's folder and checks it by running it in a fresh isolated
interpreter. The script imports only torch, torch_mlir, iree.compiler,
iree.runtime and numpy (and the standard library), runs the same stages with
the exact flags and device description the target used, prints
``signature: <signature>`` only when it observes the fault, and exits 1 while
the bug is present, 0 once it is fixed, 2 when it cannot run (no device, a
different error, or any exception it did not expect: never a traceback's
exit 1, which a script checking a fix by exit status would read as the bug).
It takes the smallest honest form: for a MISMATCH localized to one op, a
single-op module fed that op's real inputs (captured from the eager run of
the stored sample) and judged against the same op in float64 (a float64
twin that computes the dtypes the op names in float64; bfloat16 operands
enter as float32 and are cast inside); for an EXPORT_ERROR, the one op of
the model whose own ``torch.export`` fails with the same bucket key (torch
and numpy only); for a torch-mlir lowering failure naming a torch op, that op
alone lowered the same way (no IREE); otherwise, or when that form does not
reproduce, the shrunk DLRM written out as plain PyTorch, generated from the
exported ATen graph, with its weights in ``params.npz``. Compile and run go through IREE, or,
for a bug of torch-mlir's refbackend or one no IREE target showed, through
refbackend itself (its runtime in ``refbackend_runtime.py`` beside the
script). A repro that does not fail is never passed off as one: the returned
``Repro.status`` says so, for the case to record. It runs in a worker
process (torch available); failures of the toolchain never raise, only bugs
of ours do. A case of the other roads into IREE (ONNX, onnxruntime,
turbine) is reproduced with the road's own packages instead: for an error,
the one op of the model that fails the road's pipeline alone the same way
(``road_op``), else the whole model on the road (``road``). One module per
form (``single_op``, ``export_error``, ``lowering``, ``model``, ``road``,
``road_op``) over the shared pieces (``graph``: the exported
program and one op cut out of it; ``script``: the slots every script fills
from its target; ``core``: running a repro and reading its status);
``write`` picks the form. A script's text is a template in ``templates/``
(``single_op.py``, ``op_failure.py`` for the export and lowering forms,
``model.py``, ``road.py``, ``road_op.py``, and the parts they include), real Python that mypy reads;
``template`` fills its named slots.
"""

from fuzz.reports.repro.core import ALLOWED_IMPORTS, Repro, fault_parts, hang_limit_s, repro_target, run_repro
from fuzz.reports.repro.graph import INLINE_MAX_ELEMENTS
from fuzz.reports.repro.script import RUNTIME_FILE
from fuzz.reports.repro.write import SEARCHED_FORMS, SINGLE_OP_FORMS, has_single_op_form, write_repro

__all__ = ["Repro", "repro_target", "write_repro", "SEARCHED_FORMS", "SINGLE_OP_FORMS", "has_single_op_form", "run_repro",
           "fault_parts", "hang_limit_s", "RUNTIME_FILE", "ALLOWED_IMPORTS", "INLINE_MAX_ELEMENTS"]
