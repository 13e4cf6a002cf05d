#| Part of the failure forms (op_failure.py, model.py): the script's one stage
#| boundary. MLIR prints its diagnostics on fd 2, not into the exception, so
#| fd 2 is captured around each stage; the fault is present when the stage is
#| STAGE and its text holds FAULT's words in order (markers: ../template.py).
import os  # @stub
import sys  # @stub
import tempfile  # @stub
SIGNATURE = ''  # @stub
STAGE: str | None = None  # @stub
FAULT: list[str] = []  # @stub
def attempt(stage, fn):
    '''Run one stage; on failure: exit 1 if it is the fault, else 2.'''
    sys.stderr.flush()
    saved, error = os.dup(2), None
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            value = fn()
        except Exception as exc:
            error = f'{type(exc).__name__}: {exc}'
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        sink.seek(0)
        printed = sink.read().decode('utf-8', 'replace')
    if error is None:
        return value
    text, at = ' '.join(f'{printed}\n{error}'.split()), 0
    for part in FAULT:  # the fault's words, in order (numbers, names, shapes vary)
        at = -1 if at < 0 else text.find(part, at)
        at = at if at < 0 else at + len(part)
    if stage == STAGE and at >= 0:
        print(f'{stage} failed:', next((l for l in f'{printed}\n{error}'.splitlines() if all(p in l for p in FAULT[:1])), error)[:500])
        print('signature:', SIGNATURE)
        sys.exit(1)
    print(f'cannot run: {stage} failed with another error:', f'{printed}\n{error}'.strip()[-3000:])
    sys.exit(2)
