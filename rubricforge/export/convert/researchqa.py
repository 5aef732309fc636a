"""ResearchQA (``realliyifei/ResearchQA``, a JSON array): ``{"id", "general_domain", "subdomain", "field",
"query", "date", "rubric": [{"rubric_item", "type"}]}``. Its coverage score is the share of rubric items a
response satisfies, so every item is read with weight 1 (and only unweighted rubrics are written); the item's
``type`` becomes the criterion's title, ``field`` the row's topic.
"""

from __future__ import annotations

from rubricforge.export.convert._layout import Layout

NAME = "researchqa"
DESCRIPTION = "ResearchQA: id + query + field + rubric [{rubric_item, type}] (equal weights)"
LAYOUT = Layout("ResearchQA", question="query", rubrics="rubric", text="rubric_item", title="type",
                columns={"field": "topic"}, constants={"general_domain": "", "subdomain": "", "date": ""})
detect, to_rubricforge, from_rubricforge = LAYOUT.detect, LAYOUT.to_rubricforge, LAYOUT.from_rubricforge
