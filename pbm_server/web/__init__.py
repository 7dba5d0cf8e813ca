"""The server's HTTP side: health, metrics (and the game pages to come)."""
