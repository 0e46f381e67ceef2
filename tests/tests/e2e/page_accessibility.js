// An axe-style check of the page as it stands (the e2e's page phase evaluates it): each rule,
// and the elements that break it. Only what is shown counts.
(() => {
  const shown = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  const describe = (el) => el.id ? `#${el.id}` : `${el.tagName.toLowerCase()}${el.dataset.key ? `[${el.dataset.key}]` : ""}`;
  const name = (el) => (el.getAttribute("aria-label") || "").trim()
    || (el.getAttribute("aria-labelledby") || "").split(" ").map((id) => document.getElementById(id)?.textContent || "").join(" ").trim()
    || [...(el.labels || [])].map((l) => l.textContent).join(" ").trim()
    || (el.tagName === "BUTTON" || el.tagName === "A" || el.tagName === "SUMMARY" ? el.textContent.trim() : "");
  const rgb = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const l = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const contrast = (el) => {
    const [a, b] = [luminance(rgb(getComputedStyle(el).color).slice(0, 3)), luminance(background(el))];
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  };
  const rules = {
    "html has a lang": () => document.documentElement.lang ? [] : ["html"],
    "the page has a title": () => document.title.trim() ? [] : ["title"],
    "every form control has a label": () => [...document.querySelectorAll("input, select, textarea")].filter(shown).filter((el) => !name(el)).map(describe),
    "every button and link has a name": () => [...document.querySelectorAll("button, a, summary")].filter(shown).filter((el) => !name(el)).map(describe),
    "no positive tabindex (focus follows the page's order)": () => [...document.querySelectorAll("[tabindex]")].filter((el) => el.tabIndex > 0).map(describe),
    "every table is named and its headers scoped": () => [...document.querySelectorAll("table")].filter(shown).filter((t) => !name(t) && !t.caption
      || [...t.querySelectorAll("th")].some((th) => !th.scope)).map(describe),
    "headings do not skip a level": () => {
      const levels = [...document.querySelectorAll("h1, h2, h3, h4")].filter(shown).map((h) => Number(h.tagName[1]));
      return levels.filter((l, i) => i > 0 && l > levels[i - 1] + 1).map((l) => `h${l}`);
    },
    "errors and changes are announced (alert and status regions)": () => ["shells-error", "shells-status", "create-error", "sign-in-error", "live", "terminal-status"]
      .filter((id) => !["alert", "status"].includes(document.getElementById(id)?.getAttribute("role"))),
    "ids are unique": () => {
      const ids = [...document.querySelectorAll("[id]")].map((el) => el.id);
      return ids.filter((id, i) => ids.indexOf(id) !== i);
    },
    "text contrast is at least 4.5:1": () => [...document.querySelectorAll("h1, h2, p, label, td, th, button, span, dt, dd, li, summary")]
      .filter(shown).filter((el) => el.textContent.trim()).filter((el) => contrast(el) < 4.5)
      .map((el) => `${describe(el)} ${contrast(el).toFixed(2)}:1`),
  };
  const failures = [];
  for (const [rule, check] of Object.entries(rules)) for (const what of check()) failures.push(`${rule}: ${what}`);
  return { checked: Object.keys(rules), failures };
})()
