"""Encoding of step results as JSON text (msgspec), and the registry of user types.

A result made only of JSON-native values (``None``, ``bool``, ``int``,
finite ``float``, ``str``, ``list``, ``dict`` with ``str`` keys — exact
types, not subclasses) is stored as ordinary JSON, untagged. Anything else
is a *tagged document*, in which every non-JSON value is a one-key object
whose key starts with ``!`` (a *tag*: ``{"!tuple": [1, 2]}``). A str-keyed
dict or a list holding tags stays a JSON object or array, its typed values
tagged in their places, and the text ends with the *mark*, a space
(``{"hits":3,"when":{"!datetime":"…"}} ``), so that ``json_extract(result,
'$.hits')`` finds what it names; any other value is one tag at the top.
A dict of the user's whose only key starts with ``!`` is escaped as
``{"!dict": {"!x": …}}`` at the top and inside a tagged document (in plain
JSON below the top it is stored as it is: no tag is looked for there).
Decoding looks at the top level and the last character only: plain JSON
comes straight back from msgspec. Rows written before the mark, which
wrapped a whole dict or list as ``{"!dict": {…}}`` or ``{"!list": […]}``,
read back as they were.

Built-in and standard-library types are always known. The user's own
classes (dataclasses, NamedTuples, enums, ``msgspec.Struct``, Pydantic v2
models, exceptions, anything with an encode/decode pair) are rebuilt only
if registered: :func:`register` on the default registry, or a
:class:`CodecRegistry` passed to ``Journal(registry=...)``. A tag is looked
up in the registry and nowhere else: decoding never imports a module, never
resolves a name the data gives, never uses pickle or eval.

Evolution: a registered class that gained a field with a default decodes
old rows; a recorded field the class no longer has, or a field the class
requires that the row lacks, is a DecodeError naming the class and field.

What encode accepts, decode reads back, in any process and from any call
stack: a value nests at most :data:`MAX_DEPTH` levels (deeper is an
EncodeError naming the path), and decode retries on a fresh thread when the
caller's stack is too deep for it; an int beyond Python's 4,300-digit guard
is hex text (``{"!int": "0x…"}``) whatever the writer's guard, and a str
holding lone surrogates, which UTF-8 cannot carry, is
``{"!str": ["text", 56575, …]}``.

The package, bottom up: ``document`` (the tag character, the mark, the
limits), ``failures`` (a failure's path and messages, and the advice for
values that can never be stored), ``entries`` (how each kind of registered
class is stored), ``tags`` (the built-in types), ``escape`` (lone
surrogates, huge ints), ``registry`` (:class:`CodecRegistry`), ``scan``
(the plain-JSON check of a large value), ``plain`` (the plain-JSON check),
``stack`` (the fresh-thread retry), ``encoding``
and ``decoding`` (the walks and :func:`encode`, :func:`decode`).
"""

from .decoding import decode
from .document import MAX_DEPTH as MAX_DEPTH  # public, documented; not in __all__, as before
from .encoding import encode

# The plain-JSON check and its twin, where the differential tests in tests/test_codec.py
# reach them (as codec._plain_walk, …).
from .plain import _plain_few as _plain_few
from .plain import _plain_small as _plain_small
from .registry import CodecRegistry, default_registry, register
from .scan import _finite as _finite
from .scan import _plain_referents as _plain_referents
from .scan import _plain_scan as _plain_scan
from .scan import _plain_walk as _plain_walk

__all__ = ["CodecRegistry", "decode", "default_registry", "encode", "register"]
