"""Running the server: `pbm serve` and its processes (server), the clock's side (scheduler), and the `pbm`
command line (cli).

The top layer: it may import every other.
"""
