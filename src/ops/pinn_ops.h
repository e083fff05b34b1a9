// Physics-informed ops: jets (a point's value with its derivatives, see JetSpec in ir.h),
// Fourier features, expression losses and collocation points. Their rows of the op table.
#pragma once

#include "ir/op_table.h"

namespace sg::ops {

void check_jet(const OpCheck& c);  // every jet op: row counts against the jet's components
std::string jet_attrs_text(const Op& op);
void grad_jet_activation(GradBuilder& g, const Op& op);
void grad_fourier_features(GradBuilder& g, const Op& op);
std::function<void()> cpu_jet_input(const CpuBind& b);
std::function<void()> cpu_jet_activation(const CpuBind& b);
std::function<void()> cpu_jet_activation_backward(const CpuBind& b);
std::function<void()> cpu_fourier_features(const CpuBind& b);
std::function<void()> cpu_fourier_features_backward(const CpuBind& b);

void check_expression_loss(const OpCheck& c);
std::function<void()> cpu_expression_loss(const CpuBind& b);
std::string expression_loss_attrs_text(const Op& op);

void check_sample_points(const OpCheck& c);
std::function<void()> cpu_sample_points(const CpuBind& b);
bool sample_points_same_every_step(const Op& op, bool inputs_fixed);

// The seed jet of points X [B, d] (value x, d/dx_i = e_i, second derivatives 0), after the
// coordinates of the value-only points given as further inputs (JetAttrs::head rows).
inline constexpr OpDef kJetInput{OpKind::JetInput, "jet_input", "X heads...", "J", check_jet, no_gradient,
                                 cpu_jet_input, same_if_inputs_fixed, jet_attrs_text};
inline constexpr OpDef kJetActivation{OpKind::JetActivation, "jet_activation", "A", "Y", check_jet,
                                      grad_jet_activation, cpu_jet_activation, same_if_inputs_fixed, jet_attrs_text};
inline constexpr OpDef kJetActivationBackward{OpKind::JetActivationBackward, "jet_activation_backward", "dY A", "dA",
                                              check_jet, no_gradient, cpu_jet_activation_backward, nullptr,
                                              jet_attrs_text};
// F = [sin 2 pi P, cos 2 pi P] as jets.
inline constexpr OpDef kFourierFeatures{OpKind::FourierFeatures, "fourier_features", "P", "F", check_jet,
                                        grad_fourier_features, cpu_fourier_features, same_if_inputs_fixed,
                                        jet_attrs_text};
inline constexpr OpDef kFourierFeaturesBackward{OpKind::FourierFeaturesBackward, "fourier_features_backward", "dF P",
                                                "dP", check_jet, no_gradient, cpu_fourier_features_backward, nullptr,
                                                jet_attrs_text};
// weight * mean over points of r^2 (r an expression of the coordinates X and the output jet
// U): writes dU, adds the term to the total (optional) and keeps it alone in `term`.
inline constexpr OpDef kExpressionLoss{OpKind::ExpressionLoss, "expression_loss", "U X", "total? term dU",
                                       check_expression_loss, no_gradient, cpu_expression_loss, nullptr,
                                       expression_loss_attrs_text};
void check_observed_points(const OpCheck& c);
std::function<void()> cpu_observed_points(const CpuBind& b);
std::string observed_points_attrs_text(const Op& op);

// Collocation points drawn from (seed, step / every); every = 0 draws once.
inline constexpr OpDef kSamplePoints{OpKind::SamplePoints, "sample_points", "step", "X", check_sample_points,
                                     no_gradient, cpu_sample_points, sample_points_same_every_step};
// A data term's fixed points and values, from the table in its attributes.
inline constexpr OpDef kObservedPoints{OpKind::ObservedPoints, "observed_points", "", "X XV", check_observed_points,
                                       no_gradient, cpu_observed_points, same_if_inputs_fixed,
                                       observed_points_attrs_text};

}  // namespace sg::ops
