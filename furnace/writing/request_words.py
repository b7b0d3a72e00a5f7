"""The words of the editor's requests beyond register and length (a question, a call to action,
split/merge, …) and of the requests the chat refuses (translate, add images, …): one regex pair
(en, zh) per operation or refusal key, read by :mod:`furnace.writing.addressing` in this order.
"""

from __future__ import annotations

REQUEST_WORDS: dict[str, tuple[str, str]] = {
    "refuse_translate": (
        r"\btranslat\w*\b|\b(?:in|into)\s+(?:chinese|mandarin|french|spanish|german|japanese|korean)\b",
        r"翻译|译成|译为|(?:改成|换成|写成|变成)(?:英文|英语|日文|法文)|英文版|用英文写",
    ),
    "refuse_rewrite": (
        r"\b(?:rewrite|redo|rewrite)\s+(?:it\s+|the whole thing\s+|everything\s+|the (?:whole )?piece\s+)?"
        r"(?:from scratch|completely|entirely|from the ground up)\b|\bstart over\b|\bcompletely different\b",
        r"推倒重来|从头写|完全重写|全部重写|整篇重写|重写全文|重新写一篇",
    ),
    "refuse_images": (
        r"\b(?:image|picture|photo|illustration|chart|graph|diagram|infographic|gif)s?\b",
        r"配图|图片|插图|照片|图表|示意图|动图",
    ),
    "refuse_sources": (
        r"\b(?:sources?|citations?|footnotes?|statistics|stats|links?|urls?|references)\b|\bcite\b|"
        r"\bfact[- ]?check\w*\b|\bverify the facts\b",
        r"来源|出处|参考文献|引用文献|链接|数据支撑|统计数据|核实|事实核查|查证",
    ),
    "merge": (
        r"\bmerge\b|\bcombine\b|\bjoin\b|\bfold\b.*\binto\b",
        r"合并|合成一段|并成一段|并到|并入|合在一起|合为一段",
    ),
    "split": (
        r"\bsplit\b|\bbreak\s+(?:up\s+)?(?:it\s+|that\s+)?(?:up|in two|into two)\b|\bdivide\b|\btwo paragraphs\b",
        r"拆成|拆分|拆开|拆一下|分成两段|分两段|一分为二|分段",
    ),
    "subheading": (
        r"\bsub-?head(?:ing|er|line)?s?\b|\bsection (?:heading|title|header)s?\b|\bsubtitles? (?:for|between|in)\b",
        r"小标题|分标题|子标题|小节标题|段落标题",
    ),
    "hook": (
        r"\bhook\b|\bteaser\b|\blead-?in\b|\bopening line\b|\battention[- ]grabb\w*\b|\bgrab (?:the )?readers?\b",
        r"引子|钩子|引入句|抓人的开头|开场白|引语|吸引人的开头",
    ),
    "question": (
        r"\bquestions?\b|\binterrogative\b|\bquestion mark\b",
        r"疑问句|问句|提问|设问|反问|问号|(?:以|用|改成|变成|加个|加一个|抛个|抛出|一个)问题",
    ),
    "call_to_action": (
        r"\bcall[- ]to[- ]action\b|\bcta\b|\b(?:more|stronger|clearer)\s+(?:motivating|actionable|persuasive|"
        r"compelling|rousing)\b|\burge\b|\bmotivat\w+\b|\brally\w*\b|\binspire (?:readers|action|them)\b|"
        r"\bget (?:the )?readers? to act\b|\bpush (?:the )?readers?\b",
        r"号召|行动起来|呼吁|鼓动|感召|动员|鼓励读者|让读者(?:去)?(?:行动|试试|动起来)|行动力",
    ),
    "no_exclaim": (
        r"\bexclamation(?:\s+(?:marks?|points?))?\b|\bbangs\b",
        r"感叹号|叹号|惊叹号",
    ),
    "no_hashtags": (r"\bhash-?tags?\b|#\w", r"话题标签|hashtag|井号|#\S"),
    "short_sentences": (
        r"\bshorter sentences\b|\bsentences?\s+(?:are\s+|is\s+)?(?:too|so|very)\s+long\b|\blong sentences\b|"
        r"\bbreak up (?:the |long )?sentences\b|\brun-on\b|\bshort sentences\b",
        r"句子(?:太长|太长了|短一点|短一些|短些|拆短)|长句|短句|句子都太长",
    ),
    "title_case": (r"\btitle[- ]case\b|\bcapitali[sz]\w*\b|\bcapital letters\b", r"大小写|首字母大写"),
    "punchy": (
        r"\bpunch(?:y|ier)\b|\bcatch(?:y|ier)\b|\bsnapp(?:y|ier)\b|\bgrab\w*\b|\battention\b|\bclick\w*\b|"
        r"\bstriking\b|\bbolder\b|\bstronger\b|\bcompelling\b|\bexciting\b|\bboring\b|\bdull\b|\bbland\b",
        r"抓人|吸引人|吸睛|有冲击力|响亮|醒目|有力|带劲|亮眼|平淡|没意思|无聊|更有吸引力|勾人",
    ),
    "example": (
        r"\bexamples?\b|\bconcrete\b|\bspecifics?\b|\billustrat\w*\b|\bcase stud\w+\b",
        r"例子|举例|举个例|实例|案例|比方",
    ),
    "second_person": (
        r"\bsecond[- ]person\b|\baddress (?:the )?readers?\b|\btalk (?:directly )?to (?:the )?readers?\b|"
        r"\bspeak (?:directly )?to (?:the )?readers?\b|\buse「you」|\bas「you」",
        r"第二人称|用「你」|用你|直接对读者说|跟读者对话|对读者说话|称呼读者",
    ),
    "first_person": (
        r"\bfirst[- ]person\b|\buse「I」|\bin my (?:own )?voice\b|\bpersonal voice\b|\bmore personal\b",
        r"第一人称|用「我」|用我的口吻|以我的视角|更个人化",
    ),
    "plain": (
        r"\bplain(?:er)?\s+(?:english|language|words)\b|\bsimpler (?:words|language|wording)\b|\bjargon\b|"
        r"\bsimplif\w+\b|\beasier to (?:read|understand)\b|\bsimple words\b|\bless technical\b",
        r"通俗|大白话|简单易懂|浅显|好懂|术语|白话|易懂|简单点的词|用词简单",
    ),
    "summary": (
        r"\bsummar\w+\b|\bsum (?:it )?up\b|\brecap\b|\bkey takeaways?\b|\btakeaways?\b",
        r"总结|小结|概括|划重点|要点回顾|一句话总结",
    ),
}
