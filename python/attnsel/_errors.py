"""The C API's status codes as Python's exceptions (vLLM's error types)."""


class InternalError(RuntimeError):
    """Something unexpected failed inside libattnsel (out of memory, a bug)."""


class SelectionFailed(ValueError):
    """A ValueError from a selection, with every candidate considered and why it was rejected."""

    def __init__(self, message, candidates=()):
        super().__init__(message)
        self.candidates = list(candidates)


class SelectionNotImplemented(NotImplementedError):
    """A NotImplementedError from a selection (e.g. sparse attention on the CPU), with its candidates."""

    def __init__(self, message, candidates=()):
        super().__init__(message)
        self.candidates = list(candidates)


_BY_STATUS = {1: ValueError, 2: ImportError, 3: NotImplementedError, 4: RuntimeError, 5: InternalError, 6: OSError}
_BY_NAME = {"ValueError": ValueError, "ImportError": ImportError, "NotImplementedError": NotImplementedError,
            "RuntimeError": RuntimeError, "OSError": OSError}


def error_for_status(status, message):
    return _BY_STATUS.get(status, InternalError)(message)


def selection_error(error_type, message, candidates):
    if error_type == "ValueError":
        return SelectionFailed(message, candidates)
    if error_type == "NotImplementedError":
        return SelectionNotImplemented(message, candidates)
    return _BY_NAME.get(error_type, InternalError)(message)
