"""The wording of ``lil``'s output for people: lines for :func:`letitloop.render.echo`.

The data comes from :mod:`letitloop.inspection`; the words are here, one
module per command: ``words`` (what they share), ``runs`` (``lil runs``),
``detail`` (``lil show``) and ``follow`` (``lil show --follow``). Every line
goes out through :func:`letitloop.render.echo`, which makes recorded text
safe. Identifiers a user copies into the next command (run ids, goals,
names, step keys, watch ids) are never cut; only previews (results, errors)
are cut to the width of a terminal, and nothing is cut in a pipe.
"""
