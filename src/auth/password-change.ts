import type { Queryable } from "../db/database.js";
import { errors } from "../errors.js";
import type { PasswordHasher } from "./password.js";
import { type PasswordPolicy, requireCompliantPassword } from "./security-policy.js";
import { recentPasswords } from "./sign-in.repository.js";

/**
 * The hash of a password about to be set, after checking it against the organization's password
 * policy (every rule it breaks named, with `param`) and, for an existing account, against its
 * last `historySize` passwords, the current one included. Every password set goes through here
 * except the first administrator's, which the operator chooses before any policy exists.
 */
export async function hashNewPassword(
  deps: { q: Queryable; hasher: PasswordHasher },
  policy: PasswordPolicy,
  user: { id: string; password_hash: string } | null,
  password: string,
  param: string,
  source: string,
): Promise<string> {
  requireCompliantPassword(policy, password, param);
  if (user && policy.historySize !== null) {
    const recent = await recentPasswords(deps.q, user.id, policy.historySize);
    // Accounts made before the history existed (or whose hash was upgraded) still count their current password.
    const candidates = recent.includes(user.password_hash) ? recent : [user.password_hash, ...recent];
    for (const old of candidates.slice(0, policy.historySize)) {
      if (await deps.hasher.verify(password, old, source))
        throw errors.passwordReused(param, policy.historySize);
    }
  }
  return deps.hasher.hash(password, source);
}
