"""Rewards of rubric generators trained from preferences (Prefs): S(r|y) and R_pref (Eqs. 2–3), the hybrid
reward (Eq. 1), and preference accuracy / paired Cohen's d (Eqs. 6–7)."""
