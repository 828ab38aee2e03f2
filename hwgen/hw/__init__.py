"""Hardware templates in Amaranth: the only place that writes m.d.comb / m.d.sync."""
