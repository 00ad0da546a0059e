/**
 * The bearer checks that read nothing but the token (those `Auth.layer` makes): the Node fast
 * path runs its requests without the platform's request object, so it serves only servers whose
 * `Authentication` is one of these.
 */
const plain = new WeakSet<object>()

export const mark = <F extends object>(check: F): F => {
  plain.add(check)
  return check
}

export const isPlain = (check: object): boolean => plain.has(check)
