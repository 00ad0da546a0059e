/**
 * The class of the `decision` events the constructor in `AuditEvent.ts` builds (the one built on
 * every decision): made from typed values, with the fields of its type in the schema's order, so
 * the store keeps such an event as it is without checking it again (`instanceof`, unlike a weak
 * set, costs next to nothing). Not exported from the package: nothing else makes one.
 */
export class BuiltEvent {}
