"""What the result-cache tests share: a failing assertion's message, and a message or result without the
evidence line that says it was loaded from the result cache (the only difference from a computed one)."""
import contextlib

from pytest_privleak.cache import results as rc
from pytest_privleak import expect_leak


def leak_message(call) -> str:
    """The message of the PrivacyLeakError that ``call()`` must raise."""
    with expect_leak() as info:
        call()
    return str(info.value)


def drop_cache_line(message: str) -> str:
    return "\n".join(line for line in message.splitlines() if not line.lstrip().startswith(rc.LOADED_EVIDENCE))


def without_cache_line(result) -> dict:
    """The result's JSON without the loaded-from-cache evidence line, and without the name of the helper in its
    audit record (a figure measured by ``measure_*`` and reused by ``assert_*`` is the same measurement)."""
    data = result.to_json()
    data["evidence"] = {k: v for k, v in data["evidence"].items() if k != rc.LOADED_EVIDENCE}
    if isinstance(data.get("audit"), dict):
        data["audit"] = {k: v for k, v in data["audit"].items() if k != "helper"}
    return data


@contextlib.contextmanager
def active_result_cache(folder):
    """A fresh result cache in ``folder``, active inside the block (the one before, if any, is restored)."""
    made = rc.ResultCache(folder)
    previous = rc.activate(made)
    try:
        yield made
    finally:
        rc.activate(previous)
