//! The quickstart fleet, property-tested as a team would in its CI: every guarantee of
//! the engine, under random faults, orders and interrupted applies, on the simulated
//! cloud. (`docs/tutorial.md` shows this test.)

#[test]
fn the_quickstart_fleet_holds_every_fleet_property() {
    let fleet = examples::quickstart::fleet().expect("the quickstart fleet is sound");
    infra_testkit::check_fleet(&fleet);
}
