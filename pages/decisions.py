import streamlit as st

st.title("decisions")
st.info("coming soon")
