"""What a stored document is made of: the tag key's first character and the limits on values.

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
