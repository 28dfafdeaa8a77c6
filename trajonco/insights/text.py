"""How event descriptions become TF-IDF vectors (shared by the topic model and the patient embeddings).

Words of three letters or more, English stop words removed, sublinear term frequency: clinical event text is short
and repetitive, and this keeps one repeated word from dominating a patient.

>>> matrix, terms = tfidf(["Chronic cough for 3 weeks", "Smoker, chronic COPD"])
>>> matrix.shape, sorted(terms)
((2, 5), ['chronic', 'copd', 'cough', 'smoker', 'weeks'])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer

TOKEN_PATTERN = r"(?u)\b[a-zA-Z][a-zA-Z]{2,}\b"


def tfidf(documents: Sequence[str], *, min_df: int = 1) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Rows of L2-normalised TF-IDF (all-zero for a document of stop words only) and the vocabulary.

    An empty vocabulary (no document has a usable word) gives a matrix with no column.
    """
    vectorizer = TfidfVectorizer(token_pattern=TOKEN_PATTERN, stop_words="english", lowercase=True,
                                 sublinear_tf=True, min_df=min_df)
    try:
        matrix = vectorizer.fit_transform(list(documents))
    except ValueError:  # scikit-learn: "empty vocabulary"
        return sparse.csr_matrix((len(documents), 0)), np.array([], dtype=object)
    return sparse.csr_matrix(matrix), vectorizer.get_feature_names_out()
