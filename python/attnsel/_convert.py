"""Python values into the C API's types, refused rather than changed: an integer beyond the C
type's range raises OverflowError instead of wrapping, a fraction raises TypeError instead of
being truncated, and a string with a NUL character raises ValueError instead of being cut
where C reads it. Every error names the argument."""
import ctypes
import operator

_INT_RANGES = {
    ctypes.c_int32: (-(2**31), 2**31 - 1),
    ctypes.c_int64: (-(2**63), 2**63 - 1),
    ctypes.c_uint32: (0, 2**32 - 1),
}


def c_int(value, name, ctype=ctypes.c_int32):
    """`value` as an integer that fits `ctype`: ints, numpy integers and integer 0-d tensors;
    TypeError for bools, floats (16.5 and 16.0 alike, as PyTorch's integer arguments) and
    anything else; OverflowError outside the type's range."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got a bool ({value})")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    low, high = _INT_RANGES[ctype]
    if not low <= number <= high:
        raise OverflowError(f"{name}={number} does not fit a {_type_name(ctype)} (valid: {low} to {high})")
    return number


def c_int_list(values, name, ctype=ctypes.c_int32):
    """A flat list of c_int over `values` (a sequence, or a sequence of rows), each checked."""
    flat = []
    for i, row in enumerate(values):
        items = row if isinstance(row, (list, tuple)) else [row]
        for j, item in enumerate(items):
            where = f"{name}[{i}][{j}]" if isinstance(row, (list, tuple)) else f"{name}[{i}]"
            flat.append(c_int(item, where, ctype))
    return flat


def check_int_array(values, name, ctype, kind):
    """Refuses a numpy array or tensor that is not of an integer dtype, or whose values do not
    fit `ctype`, before it is converted (a conversion would truncate or wrap them). `kind` is
    the array's dtype kind test: numpy's dtype.kind or torch's is_floating_point."""
    if not kind:
        raise TypeError(f"{name} must hold integers, got dtype {values.dtype}")
    if values.numel() if hasattr(values, "numel") else values.size:
        low, high = _INT_RANGES[ctype]
        smallest, largest = int(values.min()), int(values.max())
        if smallest < low or largest > high:
            bad = smallest if smallest < low else largest
            raise OverflowError(f"{name} holds {bad}, which does not fit a {_type_name(ctype)} "
                                f"(valid: {low} to {high})")


def c_text(value, name):
    """`value` as UTF-8 bytes for a `const char*` (None stays None); ValueError when it holds
    a NUL character, which C would read as its end."""
    if value is None:
        return None
    text = str(value)
    if "\0" in text:
        raise ValueError(f"{name} contains a NUL character at position {text.index(chr(0))}: {text!r}")
    return text.encode("utf-8")


def config_json(value, name):
    """A JSON-text argument given as a string, a dict or an object with to_json()
    (AttentionConfig); None stays None; TypeError naming the argument otherwise."""
    import json
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value)
    if callable(getattr(value, "to_json", None)):
        return value.to_json()
    raise TypeError(f"{name} must be a JSON string, a dict or an AttentionConfig, got {type(value).__name__}")


def mapping(value, name):
    """The items of a dict argument (None = empty); TypeError naming the argument otherwise."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict, got {type(value).__name__}")
    return list(value.items())


def instance(value, cls, name):
    """`value` when it is a `cls`; TypeError naming the argument otherwise."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {type(value).__name__}")
    return value


def _type_name(ctype):
    bits = ctypes.sizeof(ctype) * 8
    return f"{bits}-bit {'unsigned' if ctype is ctypes.c_uint32 else 'signed'} integer"
