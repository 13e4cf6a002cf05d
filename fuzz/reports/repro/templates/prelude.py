#| Part of every repro.py: its first lines and its imports (markers: ../template.py).
#| An exception the script did not expect (a bug of the script, a changed API,
#| a dtype it cannot judge in) means it cannot run, exit 2, never a traceback's
#| exit 1, which a fix-checking script would read as "bug present". The
#| traceback still goes to stderr. Sections: fx (torch-mlir's importer), iree,
#| refbackend (torch-mlir's refbackend, driven by the runtime beside the
#| script), stages (the attempt() boundary's import).
import os
import sys
def unexpected(kind, exc, tb):
    '''Not the bug: exit 2, never a traceback's exit 1.'''
    sys.__excepthook__(kind, exc, tb)  # the traceback, on stderr (line-buffered)
    print('cannot run: unexpected', ' '.join(f'{kind.__name__}: {exc}'.split())[:500], flush=True)
    os._exit(2)
sys.excepthook = unexpected
import numpy as np
import torch
# @if: fx
from torch_mlir import fx
# @end: fx
# @if: iree
import iree.compiler as ireec
import iree.runtime as rt
# @end: iree
# @if: refbackend
import runpy
RefBackendModule = runpy.run_path('${runtime_file}')['RefBackendModule']  # torch-mlir's refback passes + MLIR ExecutionEngine, driven as dlrm-fuzz drives them
# @end: refbackend
# @if: stages
import tempfile
# @end: stages
