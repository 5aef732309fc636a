"""MindDR's rewards: Search-RL (§5.2: step tool / format rewards, PRM, ORM, the trajectory reward and its
scheduler) and Report-RL (§5.3: RACE, the rule-based citation and format rewards, Eq. 12; App. 8.4 tense check)."""
