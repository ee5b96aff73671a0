/**
 * The item relationship types ArcGIS documents ("Relationship types" of the portal REST API; the
 * same list as `ItemRelationshipType` of Esri's client), with the ownership rule each one adds.
 * Portico always requires the caller to own the origin item (see `RelationshipService.add`);
 * `mustOwnAllItems` and `mustOwnDestinationItem` then require the destination as well. The
 * sharing and deleting rules some types carry (`compositeShare`, `compositeDelete`) are not
 * applied: a relationship here never changes who sees or keeps an item.
 */
export type OwnershipRule = "none" | "mustOwnAllItems" | "mustOwnDestinationItem" | "mustOwnOriginItem";

export const RELATIONSHIP_TYPES: Readonly<Record<string, OwnershipRule>> = {
  APIKey2Item: "mustOwnAllItems",
  Area2CustomPackage: "mustOwnAllItems",
  Area2Package: "mustOwnAllItems",
  Item2Attachment: "mustOwnAllItems",
  Item2Report: "none",
  Listed2Provisioned: "none",
  Map2AppConfig: "mustOwnAllItems",
  Map2Area: "mustOwnAllItems",
  Map2FeatureCollection: "none",
  Map2Service: "none",
  MobileApp2Code: "none",
  Service2Data: "mustOwnAllItems",
  Service2Layer: "mustOwnAllItems",
  Service2Route: "mustOwnAllItems",
  Service2Service: "mustOwnAllItems",
  Service2Style: "mustOwnDestinationItem",
  Solution2Item: "mustOwnAllItems",
  Style2Style: "mustOwnDestinationItem",
  Survey2Data: "mustOwnOriginItem",
  Survey2Service: "mustOwnOriginItem",
  SurveyAddIn2Data: "mustOwnOriginItem",
  Theme2Story: "none",
  TrackView2Map: "mustOwnAllItems",
  WebStyle2DesktopStyle: "mustOwnAllItems",
  WMA2Code: "none",
  WorkforceMap2FeatureService: "mustOwnAllItems",
};

/** The documented spelling of a relationship type, whatever case it was sent in; undefined if none. */
export function relationshipType(name: string): string | undefined {
  const key = name.toLowerCase();
  return Object.keys(RELATIONSHIP_TYPES).find((t) => t.toLowerCase() === key);
}

/** Whether the rule of `type` requires whoever relates two items to own the destination too. */
export function mustOwnDestination(type: string): boolean {
  const rule = RELATIONSHIP_TYPES[type];
  return rule === "mustOwnAllItems" || rule === "mustOwnDestinationItem";
}
