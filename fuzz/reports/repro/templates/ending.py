#| Part of the model and road forms (markers: ../template.py), their last
#| lines: a wrong answer's verdict, or the stage a failure form stopped after,
#| passed. (The exits come last: mypy reads no further than an exit.)
import sys  # @stub
STAGE: str | None = None  # @stub
bad: int = 0  # @stub
# @if: stops_after_import
print(f'{STAGE} passed: fixed')
# @end: stops_after_import
# @if: stops_after_compile
print('compile passed: fixed')
# @end: stops_after_compile
# @if: fails_at_run
print('run passed: fixed')
# @end: fails_at_run
# @if: judges
sys.exit(int(bad > 0))
# @end: judges
# @if: fails
sys.exit(0)
# @end: fails
