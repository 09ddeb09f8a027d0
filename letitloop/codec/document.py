"""What a stored document is made of: the tag key's first character, the mark, the limits on values.

Every other module of the codec reads these; none of them is a setting.
"""

from __future__ import annotations

#: First character of every tag key. A tagged value is a JSON object with
#: exactly one key, and that key starts with this.
TAG = "!"

#: How deep a value may nest: containers (list, tuple, set, frozenset, dict)
#: and objects' fields (a dataclass's, a Struct's, what a registered encode
#: returns) inside one another. Encode refuses a deeper value (or one that
#: contains itself) with an EncodeError naming the path, so that whatever is
#: recorded reads back: decoding such a value needs at most about five Python
#: frames a level, well inside the default recursion limit of 1000 on the
#: fresh thread decode falls back to when the caller's stack is too deep.
MAX_DEPTH = 100

#: Python refuses to turn an int of more than this many digits into decimal
#: text or back (``sys.set_int_max_str_digits``, a denial-of-service guard).
#: Longer ints are stored as ``{"!int": "0x…"}``, hex text having no such
#: limit, whatever the writer's own setting.
_MAX_INT_DIGITS = 4300

#: The character that ends a document whose top level is a plain JSON object
#: or array holding tagged values (``{"hits":3,"when":{"!datetime":"…"}} ``).
#: Every JSON reader skips it (whitespace): it tells the decoder to look for
#: tags inside, and tells such a document from plain JSON, which msgspec
#: writes without whitespace and whose one-key ``{"!x": …}`` objects are the
#: user's own (rows written before the mark existed hold such objects too).
MARK = " "

#: What the decoder takes as the mark: a document ending in any JSON
#: whitespace (a hand-edited row may end with a newline).
MARKS = frozenset(" \t\n\r")


def _marked(text: str, top: object) -> str:
    """``text``, the JSON of the tagged tree ``top``, with :data:`MARK` if ``top`` is no tag.

    A top level that is one tag (``{"!tuple": […]}``) says by itself that the
    document is tagged; a plain object or array holding tags needs the mark.
    """
    if type(top) is list or (
        type(top) is dict and not (len(top) == 1 and next(iter(top)).startswith(TAG))
    ):
        return text + MARK
    return text
