"""Words too common to be evidence, in the languages a conversation is likely in.

A value that is one of these (``file``, ``Datei``, ``fichier``) never counts as typed by the
user or read from a tool: it would appear in any conversation. Folded (lower case, NFKC),
as ``matching.fold`` makes them. Short words (under four letters) never count anyway.
"""

from __future__ import annotations

_ENGLISH = """
about above after again against also back been before being below between both but
call came can could date days does doing done down each even every file files first
from have having here hers into just know last like make many money more most much must
name need next note once only other over page part payment please same send sent should
some such than that their them then there these they thing this those through time today
under until upon user very want week well were what when where which while will with
would year your yours amount subject message text data info information thanks hello
dear regards best kind update account number total new old
"""
_GERMAN = """
aber alle also auch bitte dann dass datei dateien dein diese dieser dieses doch durch
eine einem einen einer eines etwa für geld habe haben hier ihre jetzt kann nach nicht
noch oder schon sein seine sich sind über und unter viel vom von wenn werden wird wurde
zahlung zum zur danke hallo betreff
"""
_FRENCH = """
avec avoir bonjour cette dans donc elle être fait fichier fichiers leur mais merci même
nous pour quand sans sont sous tout très vous votre argent paiement objet
"""
_SPANISH = """
ahora algo archivo archivos como con cuando desde donde este esta esto gracias hola
hasta para pero porque pago dinero sobre también todo tiene usted asunto
"""
_ITALIAN = """
anche come con della delle dopo file grazie molto nella ogni pagamento perché però
questo questa sono tutto ciao denaro oggetto
"""
_RUSSIAN = """
быть было если есть как когда можно надо нет она они оплата после пожалуйста привет
спасибо так также только файл это этот деньги тема
"""

COMMON_WORDS = frozenset(
    word for block in (_ENGLISH, _GERMAN, _FRENCH, _SPANISH, _ITALIAN, _RUSSIAN)
    for word in block.split())
