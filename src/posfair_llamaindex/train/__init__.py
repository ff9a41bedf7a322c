"""Fine-tuning an embedding model on position-controlled pairs (needs the optional extra ``train``).

Submodules: ``data`` (SQuAD and user pairs whose evidence sits in a chosen slot of a document, the article
split that keeps evaluation articles out of training) and ``finetune`` (sentence-transformers training,
optional ``[DUMP]`` tokens). Nothing here is imported by the rest of the package, so the base install does
not need sentence-transformers or datasets.
"""
