import streamlit as st

st.title("cost_explorer")
st.info("coming soon")
