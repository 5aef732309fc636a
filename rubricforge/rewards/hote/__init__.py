"""HOTE's rewards (tri-evolution): the binary-judge rubric reward (Eq. 2) and the proposer reward (Eq. 5)."""
