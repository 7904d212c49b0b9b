"""L2D routing dashboard. The pages are in ``pages/``; their frame (page config, navigation) and
shared widgets and caches in ``pages/ui/``. Run: ``streamlit run app.py``.

Streamlit finds the ``st.App`` below and serves it: as the server starts, its lifespan prepares
the first view (``pages/ui/first_view.py``); each browser session then runs this file as its
script (``__main__``)."""

import streamlit as st

if __name__ == "__main__":
    from pages.ui.app import run_app

    run_app()
else:
    from pages.ui.first_view import lifespan

    app = st.App("app.py", lifespan=lifespan)
