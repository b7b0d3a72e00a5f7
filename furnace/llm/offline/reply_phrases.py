"""Fixed wording of the offline REPLY handler, by language, part and register.

Formal wording uses the register markers a reader (and the offline judge)
recognises as formal (en: "regarding", "recommend", "consider", "ensure"; zh: 您,
建议, 因此); casual wording uses contractions, exclamations and particles (en:
"!", "let's", "it's"; zh: 吧, 呀, 啦, ！). No template contains a digit except
``{n}`` in a roll call, and none contains Markdown.
"""

from __future__ import annotations

Registers = dict[str, list[str]]

_EN: dict[str, Registers] = {
    "greet": {
        "formal": ["Thank you for your question.", "Thank you for raising this."],
        "neutral": ["Good question.", "Happy to help with this."],
        "casual": ["Hey, great question!", "Oh, fun one!"],
    },
    "empathy": {
        "formal": ["I understand that this matters to you."],
        "neutral": ["I can see why this matters to you."],
        "casual": ["I totally get why you're asking!"],
    },
    "core": {
        "formal": [
            'Regarding "{topic}", I recommend approaching it through {lead}: first define the goal precisely, '
            "then consider the available options, and finally ensure the result can be verified.",
            'Regarding "{topic}", my recommendation, grounded in {lead}, is to clarify the objective, '
            "weigh the options with care, and ensure every step can be checked.",
        ],
        "neutral": [
            'On "{topic}", here is how I see it from {lead}: start with the goal, use what works, '
            "and check the result.",
            'About "{topic}": looking at it through {lead}, I would pin down the goal first, then try the simplest '
            "approach and review how it went.",
        ],
        "casual": [
            'Here\'s my take on "{topic}", straight from {lead}: figure out what you really want, try the simplest '
            "thing that works, and see how it goes!",
            'So, "{topic}"? Let\'s look at it through {lead}: pick the goal, try something small, then tweak it!',
        ],
    },
    "core_short": {
        "formal": ['Regarding "{topic}", I recommend starting from {lead} and verifying each step.'],
        "neutral": ['On "{topic}": start from {lead}, then check the result.'],
        "casual": ['"{topic}"? Go at it through {lead} and start small!'],
    },
    "core_no_topic": {
        "formal": ["I would be glad to assist from the perspective of {lead}."],
        "neutral": ["I am happy to help with anything around {lead}."],
        "casual": ["Happy to help with anything around {lead}!"],
    },
    "principles": {
        "formal": ["In doing so, I make a point of {items}."],
        "neutral": ["I make a habit of {items}."],
        "casual": ["I'm all about {items}!"],
    },
    "more": {
        "formal": ["It also concerns {items}, which deserve consideration as well."],
        "neutral": ["It also touches on {items}."],
        "casual": ["Oh, and it ties into {items} too!"],
    },
    "humor": {
        "formal": ["A touch of levity helps as well: even the best plan benefits from a second look."],
        "neutral": ["And remember: even the best plan enjoys a second look."],
        "casual": ["No rocket science needed, unless it's actually rocket science!"],
    },
    "close": {
        "formal": ["I hope this is helpful.", "Please let me know if you would like further detail."],
        "neutral": ["Hope this helps.", "Let me know if you want more detail."],
        "casual": ["Hope that helps!", "Let's keep going if you want!"],
    },
    "decline": {
        "formal": ["I am sorry, but that is a subject I do not discuss."],
        "neutral": ["Sorry, that is a topic I don't discuss."],
        "casual": ["Sorry, that's one topic I stay away from!"],
    },
    "offer": {
        "formal": ["I would be glad to help with {lead} instead."],
        "neutral": ["I can help with {lead} instead."],
        "casual": ["Happy to chat about {lead} instead, though!"],
    },
    "roll": {
        "formal": ["{n}, present and ready to assist."],
        "neutral": ["{n}, here."],
        "casual": ["{n}! Here and ready!"],
    },
    "emoji": {"formal": ["🙂"], "neutral": ["🙂"], "casual": ["😊"]},
}

_ZH: dict[str, Registers] = {
    "greet": {
        "formal": ["您好，感谢您的提问。", "您好，感谢您提出这个问题。"],
        "neutral": ["好问题。", "很高兴帮你看看这个问题。"],
        "casual": ["嗨！这个问题问得好～", "哈，这个有意思！"],
    },
    "empathy": {
        "formal": ["我理解这件事对您很重要。"],
        "neutral": ["我明白这件事对你很重要。"],
        "casual": ["我懂你为啥会问这个呀～"],
    },
    "core": {
        "formal": [
            "关于“{topic}”，我建议从{lead}的角度入手：首先明确目标，其次审慎比较可行的方案，最后务必检验结果。",
            "关于“{topic}”，基于{lead}，我的建议是：先厘清目标，再权衡各种方案，因此每一步都应当可以检验。",
        ],
        "neutral": [
            "关于“{topic}”，从{lead}的角度看：先想清楚目标，再用合适的方法，最后检查效果。",
            "说到“{topic}”，我会从{lead}出发：先定目标，再试最简单的做法，然后复盘。",
        ],
        "casual": [
            "说到“{topic}”，从{lead}的角度我是这么看的：先想清楚你到底要啥，挑最简单的办法试试，再看效果吧！",
            "“{topic}”呀？咱从{lead}聊起：先定个小目标，试一把，再慢慢调吧！",
        ],
    },
    "core_short": {
        "formal": ["关于“{topic}”，建议从{lead}入手，逐步检验。"],
        "neutral": ["关于“{topic}”，从{lead}入手，再看效果。"],
        "casual": ["“{topic}”？从{lead}入手，先试试吧！"],
    },
    "core_no_topic": {
        "formal": ["我很乐意从{lead}的角度为您提供帮助。"],
        "neutral": ["{lead}方面的问题，我都乐意帮忙。"],
        "casual": ["{lead}相关的事，尽管问我吧！"],
    },
    "principles": {
        "formal": ["在此过程中，我一贯的做法是：{items}。"],
        "neutral": ["我的习惯是：{items}。"],
        "casual": ["我一般会这样：{items}～"],
    },
    "more": {
        "formal": ["此外，这也涉及{items}，值得一并考虑。"],
        "neutral": ["这也和{items}有关。"],
        "casual": ["对了，这还跟{items}有关哦！"],
    },
    "humor": {
        "formal": ["当然，适度的轻松也有助于思考。"],
        "neutral": ["别忘了，再好的计划也值得多看一眼。"],
        "casual": ["放心，这不是火箭科学啦，除非真的是火箭科学！"],
    },
    "close": {
        "formal": ["希望对您有所帮助。", "如需进一步说明，请随时告诉我。"],
        "neutral": ["希望有帮助。", "需要的话我可以再展开。"],
        "casual": ["希望能帮到你！", "有啥再问我呀！"],
    },
    "decline": {
        "formal": ["抱歉，这个话题我不便讨论。"],
        "neutral": ["抱歉，这个话题我不讨论。"],
        "casual": ["哎呀，这个话题我不聊哈～"],
    },
    "offer": {
        "formal": ["如果您愿意，我很乐意在{lead}方面为您提供帮助。"],
        "neutral": ["可以聊聊{lead}方面的问题。"],
        "casual": ["要不咱聊聊{lead}吧？"],
    },
    "roll": {
        "formal": ["{n}号到，随时为您效劳。"],
        "neutral": ["{n}号到。"],
        "casual": ["{n}号到！"],
    },
    "emoji": {"formal": ["🙂"], "neutral": ["🙂"], "casual": ["😊"]},
}

PHRASES: dict[str, dict[str, Registers]] = {"en": _EN, "zh": _ZH}
