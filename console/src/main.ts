/** The console's shell: sign-in, navigation and the page of each address (`#/<section>`). */

import { groupPage, groupsPage, orgPage, rolesPage, securityPage, showFailure, usersPage } from "./admin.js";
import { collaborationPage, collaborationsPage } from "./collab.js";
import { contentPage, itemPage, layerPage } from "./content.js";
import { beginSignIn, completeSignIn, config, signedInAs, signOut } from "./core.js";
import { healthPage, webhookPage, webhooksPage } from "./ops.js";
import { button, h, messageArea, page, say, showError } from "./ui.js";

const SECTIONS: [string, string][] = [
  ["#/organization", "Organization"],
  ["#/security", "Security"],
  ["#/users", "Users"],
  ["#/roles", "Roles"],
  ["#/groups", "Groups"],
  ["#/content", "Content"],
  ["#/webhooks", "Webhooks"],
  ["#/collaborations", "Collaboration"],
  ["#/health", "Health"],
];

type Route = [RegExp, (...m: string[]) => Promise<void>];
const ROUTES: Route[] = [
  [/^#\/organization$/, orgPage],
  [/^#\/security$/, securityPage],
  [/^#\/users$/, () => usersPage()],
  [/^#\/roles$/, rolesPage],
  [/^#\/groups$/, groupsPage],
  [/^#\/groups\/([\w-]+)$/, groupPage],
  [/^#\/content$/, () => contentPage()],
  [/^#\/items\/([\w-]+)$/, itemPage],
  [/^#\/items\/([\w-]+)\/layers\/(\d+)$/, layerPage],
  [/^#\/webhooks$/, webhooksPage],
  [/^#\/webhooks\/([\w-]+)$/, webhookPage],
  [/^#\/collaborations$/, collaborationsPage],
  [/^#\/collaborations\/([\w-]+)$/, collaborationPage],
  [/^#\/health$/, healthPage],
];

function navigation(): void {
  const nav = document.getElementById("nav") as HTMLElement;
  const current = location.hash.split("/").slice(0, 2).join("/");
  nav.hidden = false;
  nav.replaceChildren(
    h(
      "ul",
      {},
      ...SECTIONS.map(([href, label]) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              href,
              "aria-current":
                href === current || (href === "#/content" && current === "#/items") ? "page" : undefined,
            },
            label,
          ),
        ),
      ),
    ),
  );
  const who = document.getElementById("who") as HTMLElement;
  who.replaceChildren(
    `Signed in as ${signedInAs() ?? ""} `,
    button("Sign out", () => {
      void signOut().then(() => location.replace(config.redirectUri));
    }),
  );
}

async function route(): Promise<void> {
  // Only `#/…` addresses are pages; `#main` is the skip link's target.
  if (!location.hash.startsWith("#/")) {
    if (location.hash === "") location.replace("#/organization");
    return;
  }
  navigation();
  say("");
  const found = ROUTES.map(([re, show]) => [re.exec(location.hash), show] as const).find(([m]) => m);
  const main = document.getElementById("main") as HTMLElement;
  main.setAttribute("aria-busy", "true");
  try {
    if (!found) page("Not found", h("p", {}, "No page here."));
    else await found[1](...(found[0] as RegExpExecArray).slice(1));
  } catch (err) {
    showFailure(err);
  } finally {
    main.removeAttribute("aria-busy");
    main.dataset.page = location.hash;
  }
}

function signInScreen(problem?: string): void {
  const area = messageArea();
  if (problem) showError(area, problem);
  page(
    "Sign in",
    h("p", {}, "The console signs in through this portal's own sign-in page (OAuth 2.0 with PKCE)."),
    button("Sign in", () => void beginSignIn(), { id: "sign-in" }),
    area,
  );
}

async function start(): Promise<void> {
  // Always at the registered address (the redirect URI must match it exactly).
  if (`${location.origin}${location.pathname}` !== config.redirectUri && !location.search) {
    location.replace(`${config.redirectUri}${location.hash}`);
    return;
  }
  const problem = await completeSignIn();
  if (!signedInAs()) {
    signInScreen(problem);
    return;
  }
  window.addEventListener("hashchange", () => void route());
  await route();
}

void start();
