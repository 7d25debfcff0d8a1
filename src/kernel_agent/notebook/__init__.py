"""Notebook files: the transcript written as a run goes, outputs as nbformat stores
them, the clean copy, verification by re-execution, comparison and export.

- :mod:`.outputs`: iopub messages -> nbformat output nodes (pure, bounded);
- :mod:`.transcript`: the notebook written atomically after every cell;
- :mod:`.clean`: the reproducible notebook derived from a transcript;
- :mod:`.verify`, :mod:`.compare`: re-execute a notebook and compare its outputs;
- :mod:`.export`, :mod:`.nbio`: export to HTML/PDF/script; read and validate files.
"""
