import { errors } from "../errors.js";

/**
 * The organization's security policy (`portals/<id>/securityPolicy`): the password rules of the
 * ArcGIS REST API (`minLength` ... `historySize`) and portico's account lockout, which ArcGIS
 * exposes only in its web pages. Pure functions; the portal service stores it and the account
 * and sign-in services enforce it.
 */
export interface PasswordPolicy {
  /** 8 to 1000. */
  minLength: number;
  /** The `min*` counts: null (no rule) or at least 1. */
  minUpper: number | null;
  minLower: number | null;
  minLetter: number | null;
  minDigit: number | null;
  /** Characters that are neither letters nor digits. */
  minOther: number | null;
  /** Days a password stays valid; null: it does not expire. */
  expirationInDays: number | null;
  /** How many of the user's most recent passwords (the current one included) a new one must differ from. */
  historySize: number | null;
}

export interface LockoutPolicy {
  /** Consecutive failed sign-ins of one username that lock it. */
  maxFailedAttempts: number;
  /** Failures count towards the limit while less than this many minutes passed since the first. */
  failedAttemptsWindowInMinutes: number;
  /** How long a locked username stays locked. */
  lockoutDurationInMinutes: number;
}

export interface SecurityPolicy {
  passwordPolicy: PasswordPolicy;
  lockoutPolicy: LockoutPolicy;
  /** Epoch ms of the last update or reset; -1 while the defaults were never changed. */
  modified: number;
}

export type PasswordRule = keyof PasswordPolicy;
export type LockoutRule = keyof LockoutPolicy;

/**
 * The default password policy is what portico always enforced (8 characters at least), not
 * ArcGIS Online's (which adds a letter and a digit): tightening it silently would refuse
 * passwords scripts already use. Administrators raise it with `securityPolicy/update`.
 */
export const DEFAULT_PASSWORD_POLICY: Readonly<PasswordPolicy> = Object.freeze({
  minLength: 8,
  minUpper: null,
  minLower: null,
  minLetter: null,
  minDigit: null,
  minOther: null,
  expirationInDays: null,
  historySize: null,
});

/** ArcGIS Enterprise's built-in store: 5 consecutive failures within 15 minutes lock for 15 minutes. */
export const DEFAULT_LOCKOUT_POLICY: Readonly<LockoutPolicy> = Object.freeze({
  maxFailedAttempts: 5,
  failedAttemptsWindowInMinutes: 15,
  lockoutDurationInMinutes: 15,
});

/** Limits of each setting, as the update operation checks them (ArcGIS's documented ranges). */
export const PASSWORD_RULE_RANGES: Readonly<
  Record<PasswordRule, { min: number; max: number; nullable: boolean }>
> = {
  minLength: { min: 8, max: 1000, nullable: false },
  minUpper: { min: 1, max: 1000, nullable: true },
  minLower: { min: 1, max: 1000, nullable: true },
  minLetter: { min: 1, max: 1000, nullable: true },
  minDigit: { min: 1, max: 1000, nullable: true },
  minOther: { min: 1, max: 1000, nullable: true },
  expirationInDays: { min: 1, max: 1095, nullable: true },
  historySize: { min: 1, max: 24, nullable: true },
};

export const LOCKOUT_RULE_RANGES: Readonly<Record<LockoutRule, { min: number; max: number }>> = {
  maxFailedAttempts: { min: 1, max: 100 },
  failedAttemptsWindowInMinutes: { min: 1, max: 1440 },
  lockoutDurationInMinutes: { min: 1, max: 1440 },
};

export const PASSWORD_RULES = Object.keys(PASSWORD_RULE_RANGES) as PasswordRule[];
export const LOCKOUT_RULES = Object.keys(LOCKOUT_RULE_RANGES) as LockoutRule[];

/**
 * What `securityPolicy/update` changes: each rule sent with a value takes it; a rule sent empty
 * (ArcGIS's own example sends `minUpper=`) is cleared, to null where the rule may be absent and
 * otherwise back to its default (an undefined change removes the stored value); a rule not sent
 * keeps its value.
 */
export function policyChanges(
  sent: Partial<Record<PasswordRule | LockoutRule, number>>,
  sentEmpty: ReadonlySet<string>,
): { passwordPolicy: Partial<PasswordPolicy>; lockoutPolicy: Partial<LockoutPolicy> } {
  const pick = <K extends PasswordRule | LockoutRule>(
    rules: readonly K[],
    nullable: (rule: K) => boolean,
  ) => {
    const out: Partial<Record<K, number | null | undefined>> = {};
    for (const rule of rules) {
      const value = sent[rule];
      if (value !== undefined) out[rule] = value;
      else if (sentEmpty.has(rule)) out[rule] = nullable(rule) ? null : undefined;
    }
    return out;
  };
  return {
    passwordPolicy: pick(
      PASSWORD_RULES,
      (rule) => PASSWORD_RULE_RANGES[rule].nullable,
    ) as Partial<PasswordPolicy>,
    lockoutPolicy: pick(LOCKOUT_RULES, () => false) as Partial<LockoutPolicy>,
  };
}

/** The most passwords ever kept per user: the largest `historySize`. */
export const MAX_HISTORY = PASSWORD_RULE_RANGES.historySize.max;

/** What is stored: only the settings that were set, so later defaults apply to the others. */
export interface StoredSecurityPolicy {
  passwordPolicy?: Partial<PasswordPolicy>;
  lockoutPolicy?: Partial<LockoutPolicy>;
  modified?: number;
}

export function securityPolicyOf(stored: string): SecurityPolicy {
  const parsed = JSON.parse(stored) as StoredSecurityPolicy;
  return {
    passwordPolicy: { ...DEFAULT_PASSWORD_POLICY, ...parsed.passwordPolicy },
    lockoutPolicy: { ...DEFAULT_LOCKOUT_POLICY, ...parsed.lockoutPolicy },
    modified: parsed.modified ?? -1,
  };
}

/**
 * The resource as ArcGIS answers it: `passwordPolicy` with only the rules that are set, `type`
 * `default` until an administrator changed it. `lockoutPolicy` is portico's.
 */
export function securityPolicyJson(policy: SecurityPolicy): Record<string, unknown> {
  const rules: Record<string, number> = {};
  for (const rule of PASSWORD_RULES) {
    const value = policy.passwordPolicy[rule];
    if (value !== null) rules[rule] = value;
  }
  return {
    passwordPolicy: {
      type: policy.modified === -1 ? "default" : "custom",
      ...rules,
      created: -1,
      modified: policy.modified,
    },
    lockoutPolicy: { ...policy.lockoutPolicy },
  };
}

/**
 * Rules that together no password could meet (more required characters than the minimum length
 * is fine; a minimum length below what the counts add up to would be refused by ArcGIS too and
 * would only confuse members). Returns the reason, or undefined.
 */
export function impossiblePolicy(p: PasswordPolicy): string | undefined {
  const letters = Math.max(p.minLetter ?? 0, (p.minUpper ?? 0) + (p.minLower ?? 0));
  const required = letters + (p.minDigit ?? 0) + (p.minOther ?? 0);
  if (required > 1000) {
    return `asks for ${required} required characters, more than the longest password allowed (1000)`;
  }
  return undefined;
}

interface CharacterCounts {
  length: number;
  upper: number;
  lower: number;
  letter: number;
  digit: number;
  other: number;
}

function countCharacters(password: string): CharacterCounts {
  const counts: CharacterCounts = { length: 0, upper: 0, lower: 0, letter: 0, digit: 0, other: 0 };
  // Code points, not UTF-16 units: an emoji is one character to the person choosing it.
  for (const ch of password) {
    counts.length++;
    if (/\p{L}/u.test(ch)) {
      counts.letter++;
      if (/\p{Lu}/u.test(ch)) counts.upper++;
      else if (/\p{Ll}/u.test(ch)) counts.lower++;
    } else if (/\p{Nd}/u.test(ch)) counts.digit++;
    else counts.other++;
  }
  return counts;
}

/**
 * The rules of the policy a password breaks, each as `"<what> (<rule>)"`; empty when it complies.
 * Expiration and history are not about the password's characters and are checked elsewhere.
 */
export function brokenRules(policy: PasswordPolicy, password: string): string[] {
  const c = countCharacters(password);
  const broken: string[] = [];
  const need = (have: number, min: number | null, what: string, rule: PasswordRule) => {
    if (min !== null && have < min) broken.push(`at least ${min} ${what}${min === 1 ? "" : "s"} (${rule})`);
  };
  need(c.length, policy.minLength, "character", "minLength");
  need(c.upper, policy.minUpper, "upper-case letter", "minUpper");
  need(c.lower, policy.minLower, "lower-case letter", "minLower");
  need(c.letter, policy.minLetter, "letter", "minLetter");
  need(c.digit, policy.minDigit, "digit", "minDigit");
  need(c.other, policy.minOther, "character other than a letter or digit", "minOther");
  return broken;
}

/** Throws a validation error naming `param` and every rule the password breaks. */
export function requireCompliantPassword(policy: PasswordPolicy, password: string, param: string): void {
  const broken = brokenRules(policy, password);
  if (broken.length > 0) {
    throw errors.invalidParameter(
      param,
      `does not meet the organization's password policy: it needs ${broken.join(", ")}`,
    );
  }
}

/** When a password set at `setAt` expires under the policy (epoch ms), or undefined when it does not. */
export function passwordExpiresAt(policy: PasswordPolicy, setAt: number): number | undefined {
  return policy.expirationInDays === null ? undefined : setAt + policy.expirationInDays * 86_400_000;
}

/**
 * What administrators see of a username's failed sign-ins (on the user resource): whether it is
 * locked and until when (-1 when not), and the failures of the current run (0 once its window
 * passed or its lock ran out).
 */
export function lockoutStatus(
  failures: { failures: number; first_failure: number; locked_until: number } | undefined,
  policy: LockoutPolicy,
  now: number,
): { locked: boolean; lockedUntil: number; failedLoginAttempts: number } {
  if (!failures) return { locked: false, lockedUntil: -1, failedLoginAttempts: 0 };
  if (failures.locked_until > now) {
    return { locked: true, lockedUntil: failures.locked_until, failedLoginAttempts: failures.failures };
  }
  const current =
    failures.locked_until === 0 &&
    failures.first_failure >= now - policy.failedAttemptsWindowInMinutes * 60_000;
  return { locked: false, lockedUntil: -1, failedLoginAttempts: current ? failures.failures : 0 };
}
