"""How mail clients quote the mail they answer, as plain text.

Each style takes the text of the mail answered (as the client shows it) and
the lines the player types, and gives back the body the client sends and the
lines the player wrote (what the server must read).  The attribution lines,
separators and header blocks are the clients' own wording; dates are fixed.
"""

from __future__ import annotations

SERVER = "pbm-server <pbm@pbm.test>"
PLAYER = "bob@example.org"


def gt(text: list[str]) -> list[str]:
    """Quote with "> " (Gmail, Thunderbird, mutt, Apple Mail); empty lines as ">"."""
    return [("> " + ln) if ln else ">" for ln in text]


def tab(text: list[str]) -> list[str]:
    """Quote with a TAB (mailx / s-nail's default indentprefix)."""
    return ["\t" + ln for ln in text]


def plain(text: list[str]) -> list[str]:
    return list(text)


def outlook_block(from_key, sent_key, to_key, subject_key, sent_value, separator=None, sender=SERVER, colon=":"):
    head = [separator] if separator else []
    head += [
        f"{from_key}{colon} {sender}",
        f"{sent_key}{colon} {sent_value}",
        f"{to_key}{colon} {PLAYER}",
        f"{subject_key}{colon} Re: orders",
        "",
    ]
    return head


def top(header: list[str], quote=gt, after: list[str] = (), before_header: list[str] = ("",)):
    """Player's lines, then (optionally a device line), then header and quote."""

    def build(q: list[str], own: list[str]):
        return own + list(after) + list(before_header) + header + quote(q), own

    return build


def bottom(header: list[str], quote=gt, greeting: list[str] = (), signature: list[str] = ()):
    """Header and quote first, the player's lines below (optionally a greeting above the quote)."""

    def build(q: list[str], own: list[str]):
        body = list(greeting) + header + quote(q) + [""] + own + list(signature)
        return body, [g for g in greeting if g.strip()] + own

    return build


def interleaved(header: list[str]):
    """The quote cut in two, the player's first line between, the rest below."""

    def build(q: list[str], own: list[str]):
        half = len(q) // 2
        body = header + gt(q[:half]) + ["", own[0], ""] + gt(q[half:]) + [""] + own[1:]
        return body, own

    return build


def unmarked_no_header(q: list[str], own: list[str]):
    """A client (or a player) that pastes the mail below without any mark or header."""
    return own + ["", ""] + q, own


def tab_no_header_bottom(q: list[str], own: list[str]):
    """BSD mailx `~m`: the mail TAB-indented, no attribution; the player writes below."""
    return tab(q) + [""] + own, own


def with_signature(build, signature: list[str]):
    def wrapped(q, own):
        body, expected = build(q, own + signature)
        return body, expected[: len(expected) - len(signature)] if signature else expected

    return wrapped


STYLES = {
    # -- Gmail (web, Android app) -------------------------------------------------
    "gmail-en-top": top([f"On Mon, Nov 23, 2026 at 2:53 PM {SERVER} wrote:", ""]),
    "gmail-en-top-wrapped-attribution": top([f"On Mon, Nov 23, 2026 at 2:53 PM Play by mail {SERVER}", "wrote:", ""]),
    "gmail-en-bottom-greeting": bottom([f"On Mon, Nov 23, 2026 at 2:53 PM {SERVER} wrote:", ""], greeting=["Hi,", ""]),
    "gmail-de-top": top([f"Am Mo., 23. Nov. 2026 um 14:53 Uhr schrieb {SERVER}:", ""]),
    "gmail-fr-top": top([f"Le lun. 23 nov. 2026 à 14:53, {SERVER} a écrit :", ""]),
    "gmail-es-top": top(["El lun, 23 nov 2026 a las 14:53, pbm-server (<pbm@pbm.test>) escribió:", ""]),
    "gmail-da-top": top([f"Den man. 23. nov. 2026 kl. 14.53 skrev {SERVER}:", ""]),
    "gmail-fi-top": top(["ma 23.11.2026 klo 14.53 pbm-server (pbm@pbm.test) kirjoitti:", ""]),
    "gmail-ru-top": top([f"пн, 23 нояб. 2026 г. в 14:53, {SERVER}:", ""]),
    "gmail-nl-top": top([f"Op ma 23 nov 2026 om 14:53 schreef {SERVER}:", ""]),
    "gmail-it-top": top([f"Il giorno lun 23 nov 2026 alle ore 14:53 {SERVER} ha scritto:", ""]),
    "gmail-ja-top": top([f"2026年11月23日(月) 14:53 {SERVER}:", ""]),
    "gmail-android-top": top(["On Mon, 23 Nov 2026, 14:53 pbm-server, <pbm@pbm.test> wrote:", ""]),
    # -- Outlook (desktop, web, mobile) ------------------------------------------------
    "outlook-en-top": top(outlook_block("From", "Sent", "To", "Subject", "Monday, November 23, 2026 2:53 PM", "_" * 32), quote=plain),
    "outlook-en-classic-top": top(
        outlook_block("From", "Sent", "To", "Subject", "Monday, November 23, 2026 2:53 PM", "-----Original Message-----", sender="pbm-server [mailto:pbm@pbm.test]"),
        quote=plain,
    ),
    "outlook-de-top": top(outlook_block("Von", "Gesendet", "An", "Betreff", "Montag, 23. November 2026 14:53"), quote=plain),
    "outlook-de-classic-top": top(outlook_block("Von", "Gesendet", "An", "Betreff", "Montag, 23. November 2026 14:53", "-----Ursprüngliche Nachricht-----"), quote=plain),
    "outlook-fr-top": top(outlook_block("De ", "Envoyé ", "À ", "Objet ", "lundi 23 novembre 2026 14:53", "_" * 32), quote=plain),
    "outlook-es-top": top(outlook_block("De", "Enviado", "Para", "Asunto", "lunes, 23 de noviembre de 2026 14:53", "-----Mensaje original-----"), quote=plain),
    "outlook-da-top": top(outlook_block("Fra", "Sendt", "Til", "Emne", "23. november 2026 14:53"), quote=plain),
    "outlook-fi-top": top(outlook_block("Lähettäjä", "Lähetetty", "Vastaanottaja", "Aihe", "maanantai 23. marraskuuta 2026 14.53"), quote=plain),
    "outlook-ru-top": top(outlook_block("От", "Отправлено", "Кому", "Тема", "23 ноября 2026 г. 14:53"), quote=plain),
    "outlook-pl-top": top(outlook_block("Od", "Wysłane", "Do", "Temat", "poniedziałek, 23 listopada 2026 14:53"), quote=plain),
    "outlook-sv-top": top(outlook_block("Från", "Skickat", "Till", "Ämne", "den 23 november 2026 14:53"), quote=plain),
    "outlook-ja-top": top(outlook_block("差出人", "送信日時", "宛先", "件名", "2026年11月23日 14:53"), quote=plain),
    "outlook-hu-name-only-top": top(outlook_block("Feladó", "Elküldve", "Címzett", "Tárgy", "2026. november 23. 14:53", sender="pbm-server"), quote=plain),
    "outlook-mobile-top": top(
        outlook_block("From", "Sent", "To", "Subject", "Monday, November 23, 2026 2:53:00 PM", "_" * 32),
        quote=plain, after=["", "Get Outlook for Android"],
    ),
    # -- Apple Mail (macOS, iOS) ------------------------------------------------------
    "apple-mail-top": top([f"> On 23 Nov 2026, at 14:53, {SERVER} wrote:", ">"]),
    "ios-top": top([f"> On 23 Nov 2026, at 14:53, {SERVER} wrote:", "> "], after=["", "Sent from my iPhone"]),
    "ios-de-top": top([f"> Am 23.11.2026 um 14:53 schrieb {SERVER}:", "> "], after=["", "Von meinem iPhone gesendet"]),
    "ios-fr-top": top([f"> Le 23 nov. 2026 à 14:53, {SERVER} a écrit :", "> "], after=["", "Envoyé de mon iPhone"]),
    "ios-es-bottom": bottom([f"El 23 nov 2026, a las 14:53, {SERVER} escribió:", ""], signature=["", "Enviado desde mi iPhone"]),
    "apple-mail-da-bottom": bottom([f"Den 23. nov. 2026 kl. 14.53 skrev {SERVER}:", ""]),
    # -- Thunderbird ---------------------------------------------------------------------
    "thunderbird-top": top(["On 23/11/2026 14:53, pbm-server wrote:"]),
    "thunderbird-bottom": bottom(["On 23/11/2026 14:53, pbm-server wrote:"]),
    "thunderbird-de-bottom": bottom(["Am 23.11.26 um 14:53 schrieb pbm-server:"]),
    "thunderbird-fr-bottom": bottom(["Le 23/11/2026 à 14:53, pbm-server a écrit :"]),
    "thunderbird-ru-bottom": bottom(["23.11.2026 14:53, pbm-server пишет:"]),
    "thunderbird-fi-bottom": bottom(["pbm-server kirjoitti 23.11.2026 klo 14.53:"]),
    "thunderbird-interleaved": interleaved(["On 23/11/2026 14:53, pbm-server wrote:"]),
    "thunderbird-top-signature": with_signature(top(["On 23/11/2026 14:53, pbm-server wrote:"]), ["-- ", "Bob Baker", "Gift-giver since 2019"]),
    # -- mutt ------------------------------------------------------------------------------
    "mutt-bottom-signature": bottom(["On Mon, Nov 23, 2026 at 02:53:00PM +0000, pbm-server wrote:"], signature=["", "-- ", "bob"]),
    "mutt-old-attribution-bottom": bottom([f"* {SERVER} [2026-11-23 14:53]:"]),
    "mutt-interleaved": interleaved(["On Mon, Nov 23, 2026 at 02:53:00PM +0000, pbm-server wrote:"]),
    # -- mailx / s-nail (TAB quoting) ------------------------------------------------------------
    "s-nail-bottom": bottom([f"{SERVER} wrote:", ""], quote=tab),
    "s-nail-top": top([f"{SERVER} wrote:", ""], quote=tab),
    "mailx-tab-no-header-bottom": tab_no_header_bottom,
    # -- phones' own clients -------------------------------------------------------------------
    "samsung-top": top(
        ["", "-------- Original message --------", f"From: {SERVER} ", "Date: 23/11/2026 14:53 (GMT+00:00) ", f"To: {PLAYER} ", "Subject: Re: orders ", ""],
        quote=plain, after=["", "", "Sent from my Galaxy"],
    ),
    "yahoo-top": top(["", f"On Monday, November 23, 2026, 02:53:00 PM GMT, {SERVER} wrote:", "", ""], quote=plain),
    # -- no mark, no header ---------------------------------------------------------------------
    "unmarked-no-header-top": unmarked_no_header,
}
