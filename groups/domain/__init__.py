"""The pure domain of groups: plain data in, plain data out, no Django (an import contract keeps it so)."""
