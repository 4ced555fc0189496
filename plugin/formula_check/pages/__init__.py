"""Page text to formula blocks: fences found and parsed, front matter, Jupyter notebooks read
(never run), each block with its snippet and its page:line."""
