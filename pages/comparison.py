import streamlit as st

st.title("comparison")
st.info("coming soon")
