"""Diagrams of the catalog: coordinate maps, the coupling graph, the compatibility matrix, stack diagrams.

One module per job: ``escape`` (label escaping), ``dot`` (DOT writer), ``render`` (``Diagram``,
formats, Graphviz, writing files), ``style``, ``filters``, ``map``, ``graphview``, ``mermaid``,
``graphml``, ``matrix``, ``stack``, ``exportall``.

Every builder returns a ``Diagram``: the Graphviz DOT source (written here, deterministically:
sorted ids, no timestamps, the layout engine and its seed fixed inside the DOT as ``layout=`` and
``start=``), a JSON-ready dict, and for graph diagrams a networkx ``MultiDiGraph`` view from which
Mermaid, GraphML and node-link JSON are written. ``Diagram.render(fmt)`` returns bytes for
``svg``, ``png``, ``pdf`` (Graphviz ``dot`` binary), ``dot``, ``mermaid``, ``graphml`` and
``json``; ``write_diagram`` writes them atomically (kg.core.yamlio.atomic_write) to the path asked for.

Diagrams and the engines chosen for them (Graphviz 2.43; each full-catalog export, process start
to file written, measured in tests/test_export_shipped.py against a 5 s CPU budget):

- coordinate map (``coordinate_map``): one HTML-table node per stage panel plus a combined
  panel; layers L7..L1 as rows, dimensions as columns, each cell listing its techniques' short
  names, shaded by count, empty cells marked; ``gaps=`` highlights ranked gaps and annotated
  cells. Engine ``dot`` (a handful of nodes; ~0.1 s SVG, ~0.4-0.9 s PNG).
- coupling graph (``coupling_graph``): techniques coloured by primary dimension, clustered by
  layer (one band per layer), properties in a band of their own; edges styled by coupling kind
  (``EDGE_STYLES``) and labelled with the dimension crossing (``compute → storage``). The whole
  graph uses the ``grid`` layout: positions from the coordinates (rows = layers, columns =
  dimensions, so a crossing is a sideways edge), drawn by Graphviz ``nop2`` with
  ``splines=curved`` (~0.2 s SVG for 128 techniques / 400 edges). Measured alternatives:
  ``dot`` with default settings took minutes on a graph this size (issue 5), and failed on
  clusters with edge labels without ``newrank``; ``fdp`` with strict ``splines=true`` 3-4 s,
  relaxed ~0.2 s but with overlapping clusters. ``engine='fdp'`` (seeded with ``start=``) stays
  available. ``focus=<id>`` with ``depth`` draws a neighbourhood with ``dot`` (``newrank``,
  left to right): under 0.4 s for depth 2 around any technique.
- compatibility matrix (``matrix_diagram``): the non-ok cells of ``kg.analyses.matrix`` as a technique x
  technique HTML table (✗ conflict / ⚠ conditional / blank ok). Engine ``dot``.
- stack diagram (``stack_diagram``): a ``check`` report's techniques and the couplings between
  them; couplings behind fired findings red with their numbers, suggested fixes dashed. ``dot``.

PNGs are capped at PNG_MAX_IN inches: raster cost grows with the pixel count.

Labels are escaped for each target (``html_text`` for DOT HTML labels, ``dot_string`` for quoted
DOT strings, ``mermaid_text`` for Mermaid), so names with quotes, ``<``, ``&``, braces or
Chinese render as text and cannot change the diagram's structure.
"""
