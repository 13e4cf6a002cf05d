#| Part of the model and road forms (markers: ../template.py), for a CRASH or
#| TIMEOUT bucket: a process can report neither its own segfault nor its own
#| hang, so the script runs its stages in a child of itself and exits 1 when
#| the child dies of the bucket's signal or is still busy after the time the
#| fuzzer gave it; any other end of the child is passed on (0 fixed, 2 cannot run).
import os  # @stub
import sys  # @stub
SIGNATURE = ''  # @stub
STAGE: str | None = None  # @stub
# @if: crash
CRASH = 0  # the signal the toolchain dies of  @value: crash_signal
# @end: crash
# @if: hang
HANG = 0.0  # seconds the fuzzer waited before calling it a hang  @value: hang_s
# @end: hang
# @if: supervised
if os.environ.get('REPRO_CHILD') != '1':  # the stages run in a child: the bug takes it down
    import subprocess
    # @if: crash
    child = subprocess.run([sys.executable, *sys.orig_argv[1:]], env={**os.environ, 'REPRO_CHILD': '1'})
    if child.returncode == -CRASH:
        print(f'{STAGE} crashed: signal {CRASH}')
        print('signature:', SIGNATURE)
        sys.exit(1)
    # @end: crash
    # @if: hang
    try:
        child = subprocess.run([sys.executable, *sys.orig_argv[1:]], env={**os.environ, 'REPRO_CHILD': '1'}, timeout=HANG)
    except subprocess.TimeoutExpired:
        print(f'{STAGE} hung: no answer within {HANG:g} s')
        print('signature:', SIGNATURE)
        sys.exit(1)
    # @end: hang
    sys.exit(child.returncode if child.returncode in (0, 2) else 2)
# @end: supervised
