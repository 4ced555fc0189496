"""What the faces share about a whole project and a whole run: reading ``mkdocs.yml`` and the
plugin's options, walking the pages, reporting progress, writing CI formats, the site's
assets, a page exported as a notebook, and a run split into shards and merged again."""
