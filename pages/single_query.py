import streamlit as st

st.title("single_query")
st.info("coming soon")
