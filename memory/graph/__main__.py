"""``python -m memory.graph STORE --out graph.png``: the older spelling of ``python -m memory graph``.

The command lives in `memory.cli.graph` (it opens the store through the facade, which the graph
package does not import); this alias only starts it, and goes once nothing calls it by this name.
"""

from __future__ import annotations

import sys

from memory.cli.graph import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
