"""What the dashboard shows, computed without any UI: each page's data comes from one module
here (``overview``, ``explorer``, ``decisions``, ``live``, ``comparison``), plus the cost
settings a page reads and the highlighted answers it draws."""
