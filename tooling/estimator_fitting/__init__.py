"""Fitting and evaluating the local token estimator against a reference BPE. Pure: nothing here
imports Django. The estimator that counts at run time, and the coefficients and lexicon fitted
here, are in :mod:`chatplatform.core.tokens`."""
