"""The wording of ``lil``'s output for people: lines for :func:`letitloop.runtext.render.echo`.

The data comes from :mod:`letitloop.inspection`, :mod:`letitloop.maintenance`
and :mod:`letitloop.supervision.control`; the words are here, one module per command
family: ``words`` (what they share), ``runs`` (``lil runs``), ``detail``
(``lil show``), ``follow`` (``lil show --follow``), ``checks`` (``lil check``) and ``changes`` (what
``lil reset/fork/gc/send/cancel`` report). Every line goes out through
:func:`letitloop.runtext.render.echo`, which makes recorded text safe. Identifiers a
user copies into the next command (run ids, goals, names, step keys, watch
ids) are never cut; only previews (results, errors) are cut to the width of
a terminal, and nothing is cut in a pipe.
"""
